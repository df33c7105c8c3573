import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The lint keeps the layers of src/ (eslint.config.mjs): no import runs back up, none closes a circle, type-only
 * imports included. Each case lints a file of src/ with one import line put before its text.
 */
const ROOT = path.join(__dirname, '..', '..');
const RULES = ['no-restricted-imports', 'import-x/no-cycle', 'imagebatch/no-circle'];
// Only these rules, so without type information: a file parsed alone.
const eslint = new ESLint({
  cwd: ROOT,
  ruleFilter: ({ ruleId }) => RULES.includes(ruleId),
  overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
});

/** What the layer and circle rules say of `file` with `line` put first (a parse error too). */
async function layerMessages(file: string, line = ''): Promise<string[]> {
  const text = `${line}\n${readFileSync(path.join(ROOT, file), 'utf8')}`;
  const [result] = await eslint.lintText(text, { filePath: path.join(ROOT, file) });
  return (result?.messages ?? []).map((m) => m.message);
}

describe('the layers of src/', { timeout: 60_000 }, () => {
  it('takes the files as they are', async () => {
    expect(await layerMessages('src/results/collect.ts')).toEqual([]);
    expect(await layerMessages('src/activities/rows.ts')).toEqual([]);
  });

  it.each([
    ['src/activities/rows.ts', "import { formatWait } from '../workflows/timeouts';", 'src/activities imports only'],
    [
      'src/activities/rows.ts',
      "import type { BatchWorkflowInput } from '../workflows';",
      'src/activities imports only',
    ],
    ['src/results/collect.ts', "import { imagesAskedFor } from '../activities/image-limits';", 'src/results imports'],
    ['src/metrics/names.ts', "import type { Activities } from '../activities';", 'src/metrics imports only'],
    ['src/activities/rows.ts', "import { defineSignal } from '@temporalio/workflow';", 'Only src/workflows runs'],
  ])('refuses an arrow back up: %s with %s', async (file, line, message) => {
    expect(await layerMessages(file, line)).toContainEqual(expect.stringContaining(message));
  });

  it('refuses a circle of type-only imports', async () => {
    expect(await layerMessages('src/model/record.ts', "import type { BatchProgress } from './progress';")).toEqual([
      'Import circle (type imports count): src/model/record.ts -> src/model/progress.ts -> src/model/record.ts.',
    ]);
  });
});
