// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const nodeBuiltins = (await import('node:module')).builtinModules;

/**
 * The layers of src/, lowest first (docs/design.md has the map). A folder imports from itself, from src/model, and
 * from the folders in `may`; from those in `types`, types only, but for the files in `values`. Any other folder of
 * ours is refused. src/cli may import anything, and nothing but src/cli imports from it (bin/ runs it);
 * src/worker.ts sits just below the CLI. `packages`: 'none' (nothing outside the folder), 'no-temporal', or any.
 * @type {Record<string, { may: string[]; types?: string[]; values?: string[]; packages?: 'none' | 'no-temporal' }>}
 */
const layers = {
  // The domain's types and pure rules.
  model: { may: [], packages: 'none' },
  util: { may: [], packages: 'no-temporal' },
  // The image service's interface, and the settings it is called with (config parses them with api's parsers).
  api: { may: ['util'], packages: 'no-temporal' },
  config: { may: ['util', 'api'] },
  codec: { may: ['config'] },
  temporal: { may: ['util'] },
  // Local mode: the home's server and worker processes, found or started (the CLI runs the worker itself).
  local: { may: ['util', 'temporal', 'config'] },
  batch: { may: ['util'], packages: 'no-temporal' },
  ledger: { may: ['util'], packages: 'no-temporal' },
  schedules: { may: ['util', 'batch', 'ledger'], packages: 'no-temporal' },
  simulator: { may: ['util', 'api'], packages: 'no-temporal' },
  // The workflow interface activities serve (signal names, activity bounds) is the one exception to types only.
  activities: {
    may: ['util', 'api', 'config', 'batch', 'ledger', 'schedules'],
    types: ['workflows'],
    values: ['workflows/definitions', 'workflows/timeouts'],
  },
  workflows: { may: [], types: ['activities'] },
  metrics: { may: ['util', 'api', 'config', 'activities'] },
  results: { may: ['util', 'api', 'batch', 'ledger', 'activities'] },
};
const ourFolders = [...Object.keys(layers), 'cli', 'worker'];

/** The `patterns` of no-restricted-imports that keep folder `name` in its layer. */
function layerPatterns(name) {
  const { may, types = [], values = [], packages } = layers[name];
  const up = '^(\\.\\./)+';
  const patterns = [];
  const refused = ourFolders.filter((f) => f !== name && f !== 'model' && !may.includes(f) && !types.includes(f));
  if (name !== 'model') {
    const allowed = ['model', ...may].join(', ') + (types.length > 0 ? `; types from ${types.join(', ')}` : '');
    patterns.push({
      regex: `${up}(${refused.join('|')})(/|$)`,
      message: `src/${name} imports only from ${allowed} (the layers in eslint.config.mjs).`,
    });
  }
  for (const f of types) {
    const except = values.filter((v) => v.startsWith(`${f}/`)).map((v) => v.slice(f.length + 1));
    patterns.push({
      regex: `${up}${f}${except.length > 0 ? `(?!/(${except.join('|')})$)` : ''}(/|$)`,
      allowTypeImports: true,
      message: `src/${name} imports only types from src/${f}.`,
    });
  }
  if (packages === 'none')
    patterns.push({ regex: '^(?!\\./)', message: `src/${name} imports nothing outside itself.` });
  if (packages === 'no-temporal') {
    patterns.push({ group: ['@temporalio/*'], message: `src/${name} knows nothing of Temporal.` });
  }
  return patterns;
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tools/', '.imagebatch/', 'out/', 'coverage/', 'test-output/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['*.mjs', 'scripts/*.mjs', 'bench/naive/*.mjs', 'bin/*.js'],
        },
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'smart'],
      // Activities are async by contract even when a body has nothing to await.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O, no wall clock.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins
            .flatMap((name) => [name, `node:${name}`])
            .map((name) => ({
              name,
              message: 'Workflow code must be deterministic: no Node built-ins (use activities for I/O).',
            })),
          patterns: [
            {
              group: ['undici', 'csv-parse'],
              allowTypeImports: true,
              message: 'Workflows import only types from I/O libraries.',
            },
            ...layerPatterns('workflows'),
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='Date'][property.name='now']",
          message: 'Use workflow time, not Date.now().',
        },
        {
          selector: "MemberExpression[object.name='Math'][property.name='random']",
          message: 'Use uuid4() or a seeded value.',
        },
        { selector: "CallExpression[callee.name='setTimeout']", message: 'Use sleep() from @temporalio/workflow.' },
      ],
    },
  },
  ...Object.keys(layers)
    .filter((name) => name !== 'workflows')
    .map((name) => ({
      files: [`src/${name}/**/*.ts`],
      rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns(name) }] },
    })),
  {
    files: ['src/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [{ regex: '^\\./cli(/|$)', message: 'Nothing under src imports from src/cli but src/cli itself.' }],
        },
      ],
    },
  },
  {
    // No import cycles between files of ours (type-only imports are skipped: they vanish at run time).
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js', '.json'] })],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
  {
    // A preload script (`node -r`): linted without types, outside the default project (its count is capped).
    files: ['bench/lib/*.cjs'],
    languageOptions: { sourceType: 'commonjs', parserOptions: { projectService: false } },
  },
  {
    files: ['**/*.mjs', 'bench/lib/*.cjs', 'bin/*.js'],
    ...tseslint.configs.disableTypeChecked,
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', require: 'readonly', __dirname: 'readonly' },
    },
  },
  prettier,
);
