// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const nodeBuiltins = (await import('node:module')).builtinModules;

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tools/', '.imagebatch/', 'out/', 'coverage/', 'test-output/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.mjs', 'scripts/*.mjs', 'bench/naive/*.mjs', 'bin/*.js'] },
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
              group: ['undici', 'csv-parse', '**/activities/*', '../activities/*'],
              allowTypeImports: true,
              message: 'Workflows import only types from activities and I/O libraries.',
            },
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
  {
    files: ['**/*.mjs', 'bin/*.js'],
    ...tseslint.configs.disableTypeChecked,
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', require: 'readonly', __dirname: 'readonly' },
    },
  },
  prettier,
);
