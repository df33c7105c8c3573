import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY } from '../../src/simulator';
import { baseEnv, cli, describeRun, readCsv } from './helpers';
import { chargedKeys, startStack, type CliStack } from './stack';

/**
 * What `run` checks before money and says after it (#31): a model the account lacks stops the batch before anything
 * is started (and `validate` says so with a key at hand), the exit code says whether every row has its images
 * (`--allow-partial` for pipelines that take a part), a batch run again says that nothing new was sent, and each
 * batch writes its own output folder. Against the simulator, whose charge book shows what was charged.
 */
let stack: CliStack;
let work: string;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 31,
      generation: { queuedMs: { minMs: 20, maxMs: 60 }, runningMs: { minMs: 80, maxMs: 200 } },
      limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
    },
    minPollIntervalMs: 150,
  });
  work = await mkdtemp(path.join(stack.dir, 'work-'));
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const charges = () => stack.sim.charges.entries().filter((e) => e.kind === 'charge').length;

async function csv(name: string, rows: string[]): Promise<string> {
  const file = path.join(work, name);
  await writeFile(file, `${['id,prompt,model', ...rows].join('\n')}\n`);
  return file;
}

/** `run FILE --follow` from the work folder (its default output folder is out/<batch id> there). */
async function run(file: string, ...more: string[]) {
  const args = ['run', path.basename(file), '--follow', ...more];
  const r = await cli(args, { env: stack.cliEnv, cwd: work, timeoutMs: 90_000 });
  return { ...r, args, said: describeRun(args, r) };
}

const MODEL_LINE =
  'imagebatch: model flux-ultra (2 rows) is not available to this account (its models: flux-dev, flux-schnell, ' +
  'sdxl); fix the model column or --model; nothing was started';

describe('a model the account lacks, before anything is started', { timeout: 120_000 }, () => {
  it('run: exit 3, one line naming the model, its rows and the account models; no batch, nothing charged', async () => {
    const file = await csv('models.csv', [
      'a,a lighthouse at dusk,flux-dev',
      'b,a fox in snow,flux-ultra',
      'c,a tram at night,flux-ultra',
    ]);
    const before = charges();
    const r = await run(file, '--batch-id', 'unknown-model');
    expect(r.code, r.said).toBe(3);
    expect(
      r.stderr.split('\n').filter((l) => l.startsWith('imagebatch: ')),
      r.said,
    ).toEqual([MODEL_LINE]);
    expect(r.stderr).not.toMatch(/started batch/);
    expect(chargedKeys(stack.sim, 'unknown-model')).toEqual([]);
    expect(charges()).toBe(before);
    const status = await cli(['status', 'unknown-model'], { env: stack.cliEnv });
    expect(status.code, describeRun(['status', 'unknown-model'], status)).not.toBe(0);
  });

  it('validate with the key in its environment and no Temporal address: exit 3, the same line', async () => {
    const file = path.join(work, 'models.csv');
    const env = baseEnv({ IMAGEGEN_API_KEY: DEMO_API_KEY, IMAGEGEN_BASE_URL: stack.sim.baseUrl });
    const before = charges();
    const r = await cli(['validate', file], { env });
    expect(r.code, describeRun(['validate', file], r)).toBe(3);
    expect(r.stdout).toContain('flux-ultra: 2 rows, 2 images, NOT AVAILABLE to this account');
    expect(r.stdout).toContain('flux-dev: 1 rows, 1 images, $0.04 per image (catalog)');
    expect(r.stderr.trimEnd().split('\n')).toEqual([MODEL_LINE]);
    expect(`${r.stdout}${r.stderr}`).not.toContain(DEMO_API_KEY);
    expect(charges()).toBe(before);

    const good = await csv('good-models.csv', ['a,a lighthouse at dusk,flux-dev']);
    const ok = await cli(['validate', good], { env });
    expect(ok.code, describeRun(['validate', good], ok)).toBe(0);
    expect(ok.stdout).toContain('estimated cost: $0.04');
  });
});

describe('exit codes, re-runs and output folders', { timeout: 180_000 }, () => {
  it('a row without images exits 1; --allow-partial exits 0 unless none succeeded', async () => {
    const file = await csv('partial.csv', [
      'a,a lighthouse at dusk,flux-dev',
      'b,a fox in snow,flux-dev',
      'c,[unsafe] a dragon over a village,flux-dev',
    ]);
    const first = await run(file, '--batch-id', 'partial');
    expect(first.code, first.said).toBe(1);
    expect(first.stderr).toContain(
      'batch partial: 1 row without images (1 failed): exit 1 (--allow-partial exits 0 when some rows succeeded)',
    );

    const before = charges();
    const again = await run(file, '--batch-id', 'partial', '--allow-partial');
    expect(again.code, again.said).toBe(0);
    expect(again.stderr).toContain('started batch partial again (3 rows)');
    expect(again.stderr).toContain('batch partial is complete: 3 rows, nothing new sent ($0.08 paid earlier)');
    expect(charges()).toBe(before);

    const none = await csv('none.csv', ['x,[unsafe] a burning village,flux-dev']);
    const failed = await run(none, '--allow-partial');
    expect(failed.code, failed.said).toBe(1);
    expect(failed.stderr).toContain('batch none: no row succeeded (1 failed): exit 1');
  });

  it('the same file again: nothing new sent, said in one line; a partly new file: what was new and paid now', async () => {
    const prompts = [
      'p1,a lighthouse on a basalt cliff,flux-dev',
      'p2,a red fox curled up in snow,flux-dev',
      'p3,a bowl of ramen with steam,flux-dev',
    ];
    const file = await csv('prompts.csv', prompts);
    const first = await run(file);
    expect(first.code, first.said).toBe(0);
    expect(first.stderr).toContain('started batch prompts (3 rows)');
    expect(first.stderr).not.toContain('nothing new sent');
    const results = await cli(['results', 'prompts'], { env: stack.cliEnv, cwd: work });
    expect(results.code, describeRun(['results', 'prompts'], results)).toBe(0);
    const promptsCsv = path.join(work, 'out', 'prompts', 'results.csv');
    const written = await readFile(promptsCsv, 'utf8');

    const before = charges();
    const again = await run(file);
    expect(again.code, again.said).toBe(0);
    expect(again.stderr).toContain('started batch prompts again (3 rows)');
    expect(again.stderr.split('\n')).toContain(
      'batch prompts is complete: 3 rows, nothing new sent ($0.12 paid earlier)',
    );
    expect(charges()).toBe(before);

    // Another file, its first three rows asked before: one new row, one charge.
    const more = await csv('more.csv', [...prompts, 'p4,a paper boat on a puddle,flux-dev']);
    const partly = await run(more);
    expect(partly.code, partly.said).toBe(0);
    expect(partly.stderr.split('\n')).toContain(
      'batch more is complete: 4 rows, 1 new ($0.04 paid now), 3 reused (paid before)',
    );
    expect(charges()).toBe(before + 1);

    // One output folder per batch (no --out): the second batch's results never touch the first's.
    const moreResults = await cli(['results', 'more'], { env: stack.cliEnv, cwd: work });
    expect(moreResults.code, describeRun(['results', 'more'], moreResults)).toBe(0);
    expect((await readCsv(path.join(work, 'out', 'more', 'results.csv'))).map((r) => r.row_id)).toEqual([
      'p1',
      'p2',
      'p3',
      'p4',
    ]);
    expect(await readFile(promptsCsv, 'utf8')).toBe(written);
  });
});
