// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import importX from 'eslint-plugin-import-x';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import tseslint from 'typescript-eslint';

const nodeBuiltins = (await import('node:module')).builtinModules;

/** The files of ours (relative imports, type-only ones included) that each file imports, kept while unchanged. */
const importsRead = new Map();

/** The TypeScript file a relative specifier names, or undefined (a package, or no such file). */
function ourFile(from, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), specifier).replace(/\.js$/, '');
  return [`${base}.ts`, path.join(base, 'index.ts')].find((f) => existsSync(f));
}

/** What `file` imports of ours, read from disk (`seen` holds what one check has read already). */
function importsOf(file, seen) {
  const known = seen.get(file);
  if (known) return known;
  const mtimeMs = statSync(file).mtimeMs;
  let read = importsRead.get(file);
  if (read?.mtimeMs !== mtimeMs) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const files = importedFiles.map((f) => ourFile(file, f.fileName)).filter((f) => f !== undefined);
    read = { mtimeMs, files: [...new Set(files)] };
    importsRead.set(file, read);
  }
  seen.set(file, read.files);
  return read.files;
}

/** The shortest chain of imports from `start` back to `goal`, or undefined. */
function routeBack(start, goal, seen) {
  const cameFrom = new Map([[start, '']]);
  const queue = [start];
  while (queue.length > 0) {
    const file = /** @type {string} */ (queue.shift());
    if (file === goal) {
      const route = [];
      for (let f = file; f !== ''; f = /** @type {string} */ (cameFrom.get(f))) route.unshift(f);
      return route;
    }
    for (const next of importsOf(file, seen)) {
      if (cameFrom.has(next)) continue;
      cameFrom.set(next, file);
      queue.push(next);
    }
  }
  return undefined;
}

/**
 * No circle of imports between our files, type-only imports included: import-x/no-cycle skips those (it has no
 * option to count them), and a circle of types is still a circle in the design (the layers, docs/design.md).
 * @type {import('eslint').Rule.RuleModule}
 */
const noCircle = {
  meta: { type: 'problem', schema: [], messages: { circle: 'Import circle (type imports count): {{route}}.' } },
  create(context) {
    const file = context.physicalFilename;
    const seen = new Map();
    /** @param {any} node an import or export declaration with a source */
    const check = (node) => {
      const target = node.source && ourFile(file, String(node.source.value));
      const route = target && routeBack(target, file, seen);
      if (!route) return;
      const names = [file, ...route].map((f) => path.relative(context.cwd, f));
      context.report({ node, messageId: 'circle', data: { route: names.join(' -> ') } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check };
  },
};

/**
 * The layers of src/, lowest first (docs/design.md has the map). A folder imports from itself, from src/model, and
 * from the folders in `may`; from those in `types`, types only. Any other folder of ours is refused, so no import
 * runs back up. src/cli may import anything, and nothing but src/cli imports from it (bin/ runs it); src/worker.ts
 * sits just below the CLI. `packages`: 'none' (nothing outside the folder), 'no-temporal', or any but
 * `@temporalio/workflow` (src/workflows' own).
 * @type {Record<string, { may: string[]; types?: string[]; packages?: 'none' | 'no-temporal' }>}
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
  // A row's record as Temporal holds it: read by the activities and by the result files.
  'row-lookup': { may: [] },
  schedules: { may: ['util', 'batch', 'ledger'], packages: 'no-temporal' },
  simulator: { may: ['util', 'api'], packages: 'no-temporal' },
  // `imagebatch doctor`'s checks and paid test: a program of its own, run by an activity or by the command.
  doctor: { may: ['util', 'api', 'config'], packages: 'no-temporal' },
  // The names and bounds of the workflow interface (signals, queries, createImage's timeout) are in src/model.
  activities: { may: ['util', 'api', 'config', 'batch', 'ledger', 'schedules', 'row-lookup', 'doctor'] },
  workflows: { may: [], types: ['activities', 'doctor'] },
  metrics: { may: ['util', 'api', 'config'] },
  results: { may: ['util', 'api', 'batch', 'ledger', 'row-lookup'] },
};
const ourFolders = [...Object.keys(layers), 'cli', 'worker'];

/** The `patterns` of no-restricted-imports that keep folder `name` in its layer. */
function layerPatterns(name) {
  const { may, types = [], packages } = layers[name];
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
    patterns.push({
      regex: `${up}${f}(/|$)`,
      allowTypeImports: true,
      message: `src/${name} imports only types from src/${f}.`,
    });
  }
  if (packages === 'none')
    patterns.push({ regex: '^(?!\\./)', message: `src/${name} imports nothing outside itself.` });
  if (packages === 'no-temporal') {
    patterns.push({ group: ['@temporalio/*'], message: `src/${name} knows nothing of Temporal.` });
  }
  if (packages === undefined && name !== 'workflows') {
    patterns.push({
      group: ['@temporalio/workflow', '@temporalio/workflow/*'],
      message: `Only src/workflows runs in the workflow sandbox: src/${name} names signals and queries (src/model).`,
    });
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
    // No import cycles between files of ours: import-x/no-cycle for those that run (it skips type-only imports, which
    // vanish at run time), imagebatch/no-circle for every one, types included.
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX, imagebatch: { rules: { 'no-circle': noCircle } } },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js', '.json'] })],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }], 'imagebatch/no-circle': 'error' },
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
