import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { stringify } from 'csv-stringify/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultKind } from '../../src/simulator';
import type { BatchProgress } from '../../src/model';
import { cli, cliJson, describeRun, readCsv, waitUntil } from './helpers';
import { chargedKeys, rowOfKey, startStack, type CliStack } from './stack';

/**
 * The batch commands as a user runs them, each a `node bin/imagebatch.js ...` child process, against the
 * pinned Temporal dev server, the simulator and an `imagebatch worker` child: run (--follow --json), status,
 * ls, results and its four files, a re-run of errors.csv, a second run of the same batch id, and pause,
 * resume and cancel on a running batch. The simulator's charge book shows what was charged.
 */

// Every bound is generous: CI runs this on 2 loaded cores; a bound is a hang detector, never a speed test.
let stack: CliStack;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 11,
      generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 250, maxMs: 600 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
      // The first two submissions of a "[flaky]" prompt fail at generation (refunded), later ones succeed.
      scripts: [{ match: '[flaky]', faults: [FaultKind.FailGeneration, FaultKind.FailGeneration] }],
    },
    minPollIntervalMs: 250,
  });
});

afterAll(async () => {
  await stack?.stop();
});

/** For a failure message: the Temporal status of each row workflow `c1..cN` of a batch. */
async function rowStates(batchId: string, rows: number): Promise<string> {
  const connection = await Connection.connect({ address: stack.server.address });
  try {
    const client = new Client({ connection });
    const states = await Promise.all(
      Array.from({ length: rows }, async (_, i) => {
        const id = `${batchId}/c${i + 1}`;
        const d = await client.workflow
          .getHandle(id)
          .describe()
          .catch(() => undefined);
        return `${id}: ${d ? `${d.status.name}, ${d.raw.pendingActivities?.length ?? 0} pending activities` : 'none'}`;
      }),
    );
    return states.join('\n');
  } finally {
    await connection.close();
  }
}

/** Temporal settings only: the CLI never needs the API key. */
const env = () => ({ env: stack.cliEnv });

const MAIN_ROWS = [
  'id,prompt,model,num_images',
  'r1,a lighthouse on a basalt cliff at dusk,,',
  'r2,a red fox curled up in fresh snow,flux-schnell,2',
  'r3,[flaky] a tram crossing a bridge in the rain,,',
  'r4,a bowl of ramen with steam rising,,',
  'r5,[unsafe] a dragon over a burning village,,',
  'r6,[flaky] a paper boat on a puddle after rain,,',
  'r7,"a shop sign reading ""open"", in neon, at night",,',
];
const MAIN_IDS = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7'];
const FAILED_IDS = ['r3', 'r5', 'r6'];

interface MainBatch {
  file: string;
  out: string;
  args: string[];
  final: BatchProgress;
}

let mainBatch: Promise<MainBatch> | undefined;

/** The main batch, run once to its end with `run --follow --json` (tests that need it share it). */
function runMainBatch(): Promise<MainBatch> {
  mainBatch ??= (async () => {
    const file = path.join(stack.dir, 'main.csv');
    const out = path.join(stack.dir, 'out-main');
    await writeFile(file, `${MAIN_ROWS.join('\n')}\n`);
    const args = ['run', file, '--batch-id', 'cli-main', '--model', 'flux-dev', '--out', out];
    // Three rows fail (a row without images exits 1): --allow-partial, since some succeed.
    args.push('--max-attempts', '1', '--concurrency', '4', '--follow', '--json', '--allow-partial');
    const r = await cli(args, { ...env(), timeoutMs: 60_000 }).catch((err: Error) => {
      throw new Error(`${err.message}\nworker output:\n${stack.worker.output().slice(-4000)}`);
    });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(r.stderr).toContain('started batch cli-main (7 rows)');
    // Said before the first request: nothing of it was paid before.
    expect(r.stderr).toContain('7 rows: 0 already paid (reused, $0.00), 7 new (about $0.26 at the catalog price)');
    return { file, out, args, final: JSON.parse(r.stdout) as BatchProgress };
  })();
  return mainBatch;
}

describe('run --follow --json, status, ls', { timeout: 120_000 }, () => {
  it('runs the batch to its end and prints the final counts as JSON', async () => {
    const { final } = await runMainBatch();
    expect(final).toMatchObject({
      batchId: 'cli-main',
      status: 'completed',
      done: true,
      rowsRead: 7,
      started: 7,
      inFlight: 0,
      counts: { succeeded: 4, failed: 3, unknown: 0, cancelled: 0, not_run: 0 },
    });
    // Each row was submitted exactly once (--max-attempts 1): one charge per row, none twice.
    const rows = chargedKeys(stack.sim, 'cli-main').map((k) => rowOfKey('cli-main', k));
    expect(rows.sort()).toEqual(MAIN_IDS);
    expect(stack.sim.charges.chargedTwice()).toEqual([]);
    // flux-dev 0.04 x 3 rows + flux-schnell 0.01 x 2 images; the failed rows were refunded.
    expect(final.spentUsd).toBeCloseTo(0.14, 6);
  });

  it('status shows the ended batch (JSON and text)', async () => {
    const { final } = await runMainBatch();
    const status = await cliJson<BatchProgress>(['status', 'cli-main', '--json'], env());
    expect(status).toMatchObject({ status: 'completed', done: true, counts: final.counts, spentUsd: final.spentUsd });
    const text = await cli(['status', 'cli-main'], env());
    expect(text.code, describeRun(['status', 'cli-main'], text)).toBe(0);
    expect(text.stdout).toMatch(/^completed: \[#+\] 7\/7 \| ok 4 \| failed 3 /);
  });

  it('status of a batch that does not exist fails with exit 1 and names it', async () => {
    const r = await cli(['status', 'no-such-batch'], env());
    expect(r.code, describeRun(['status', 'no-such-batch'], r)).toBe(1);
    expect(r.stderr).toContain('no-such-batch');
  });

  it('ls lists the batch', async () => {
    await runMainBatch();
    const list = await cliJson<{ batchId: string; status: string; startTime: string }[]>(['ls', '--json'], env());
    expect(list).toContainEqual(expect.objectContaining({ batchId: 'cli-main', status: 'completed' }));
    const text = await cli(['ls'], env());
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^cli-main\tcompleted\t\d{4}-/m);
  });
});

describe('results', { timeout: 120_000 }, () => {
  it('writes results.csv (one row per input row), results.jsonl, errors.csv and index.html', async () => {
    const { out } = await runMainBatch();
    const written = await cliJson<Record<string, string | number>>(['results', 'cli-main', '--json'], env());
    expect(written).toEqual({
      resultsCsv: path.join(out, 'results.csv'),
      resultsJsonl: path.join(out, 'results.jsonl'),
      errorsCsv: path.join(out, 'errors.csv'),
      unresolvedCsv: path.join(out, 'unresolved.csv'),
      gallery: path.join(out, 'index.html'),
      open: false,
      rows: 7,
      errorRows: 3,
      errorAdvice: { submit_again: 2, revise_prompt: 1, fix_row: 0 },
      unresolvedRows: 0,
      imagesShortRows: 0,
    });
    const text = await cli(['results', 'cli-main'], env());
    expect(text.code, describeRun(['results', 'cli-main'], text)).toBe(0);
    expect(text.stdout).toContain(
      `errors.csv: 2 rows to submit again as they are (imagebatch run ${path.join(out, 'errors.csv')} ` +
        '--batch-id cli-main-retry), 1 to revise (safety filter), 0 to fix (rejected): edit or delete that one first',
    );
    expect(text.stdout).not.toContain('unresolved.csv');

    const csv = await readCsv(path.join(out, 'results.csv'));
    expect(csv.map((r) => r.row_id)).toEqual(MAIN_IDS);
    expect(csv.map((r) => r.state)).toEqual([
      'succeeded',
      'succeeded',
      'failed',
      'succeeded',
      'failed',
      'failed',
      'succeeded',
    ]);
    expect(csv[6]!.prompt).toBe('a shop sign reading "open", in neon, at night');
    expect(csv[1]!.model).toBe('flux-schnell');
    expect(csv[0]!.model).toBe('flux-dev');
    for (const row of csv) {
      const images = row.images ? row.images.split(' ') : [];
      expect(images).toHaveLength(row.state !== 'succeeded' ? 0 : row.row_id === 'r2' ? 2 : 1);
      for (const image of images) expect(existsSync(path.join(out, image)), image).toBe(true);
      if (row.state === 'failed') expect(row.error).not.toBe('');
    }

    const jsonl = (await readFile(path.join(out, 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { row_id: string; state: string });
    expect(jsonl.map((r) => [r.row_id, r.state])).toEqual(csv.map((r) => [r.row_id, r.state]));

    const errors = await readCsv(path.join(out, 'errors.csv'));
    expect(errors.map((r) => r.id)).toEqual(FAILED_IDS);
    expect(errors[1]).toMatchObject({ prompt: '[unsafe] a dragon over a burning village', model: 'flux-dev' });

    const html = await readFile(path.join(out, 'index.html'), 'utf8');
    expect(html.match(/<figure class="card /g)).toHaveLength(7);
    expect(html.match(/<img /g)).toHaveLength(5);
  });

  it('errors.csv runs again under a new batch id, its rows to submit again as they are: only those are submitted', async () => {
    const { out } = await runMainBatch();
    await cliJson(['results', 'cli-main', '--json'], env());
    const errorsCsv = path.join(out, 'errors.csv');
    // Nothing in errors.csv holds money, so the reader accepts the file as it is; the safety filter's row would only
    // fail again (refunded), which its advice says.
    const accepted = await cli(['validate', errorsCsv], env());
    expect(accepted.code, describeRun(['validate', errorsCsv], accepted)).toBe(0);
    const rows = await readCsv(errorsCsv);
    expect(rows.map((r) => [r.id, r.state, r.advice, r.resubmittable])).toEqual([
      ['r3', 'failed', 'submit_again', 'true'],
      ['r5', 'failed', 'revise_prompt', 'false'],
      ['r6', 'failed', 'submit_again', 'true'],
    ]);
    // results.csv holds the succeeded rows: fed to the reader, they are refused as paid.
    const resultsCsv = path.join(out, 'results.csv');
    const refused = await cli(['validate', resultsCsv], env());
    expect(refused.code, describeRun(['validate', resultsCsv], refused)).toBe(3);
    expect(refused.stdout + refused.stderr).toContain('may have been paid: resolve it with imagebatch reconcile');
    const retryCsv = path.join(out, 'retry.csv');
    await writeFile(
      retryCsv,
      stringify(
        rows.filter((r) => r.advice === 'submit_again'),
        { header: true },
      ),
    );
    const validate = await cli(['validate', retryCsv], env());
    expect(validate.code, describeRun(['validate', retryCsv], validate)).toBe(0);
    expect(validate.stdout).toContain('2 rows, 2 valid, 0 problem(s)');

    const charges = stack.sim.charges.entries().filter((e) => e.kind === 'charge').length;
    const args = ['run', retryCsv, '--batch-id', 'cli-retry', '--out', path.join(stack.dir, 'out-retry')];
    args.push('--follow', '--json');
    const r = await cli(args, { ...env(), timeoutMs: 60_000 });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(r.stderr).toContain('started batch cli-retry (2 rows)');
    // The flaky rows succeed now (their scripted failures are used up).
    expect(JSON.parse(r.stdout)).toMatchObject({
      status: 'completed',
      rowsRead: 2,
      counts: { succeeded: 2, failed: 0, unknown: 0, cancelled: 0, not_run: 0 },
    });
    const retried = chargedKeys(stack.sim, 'cli-retry').map((k) => rowOfKey('cli-retry', k));
    expect(retried.sort()).toEqual(['r3', 'r6']);
    expect(stack.sim.charges.entries().filter((e) => e.kind === 'charge').length - charges).toBe(2);
  });

  it('run again with the same batch id: the same result, nothing charged again', async () => {
    const { args, final } = await runMainBatch();
    const charges = stack.sim.charges.entries().filter((e) => e.kind === 'charge').length;
    const again = await cli(args, { ...env(), timeoutMs: 60_000 });
    expect(again.code, describeRun(args, again)).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ status: 'completed', done: true, counts: final.counts });
    expect(stack.sim.charges.entries().filter((e) => e.kind === 'charge').length).toBe(charges);
    expect(stack.sim.charges.chargedTwice()).toEqual([]);
  });
});

describe('pause, resume, cancel', { timeout: 120_000 }, () => {
  it('act on a running batch, and status --json shows each effect', async () => {
    const rows = 16;
    const file = path.join(stack.dir, 'ctl.csv');
    const lines = Array.from({ length: rows }, (_, i) => `c${i + 1},"a watercolour harbour at dawn, number ${i + 1}"`);
    await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
    const run = ['run', file, '--batch-id', 'cli-ctl', '--model', 'flux-dev', '--concurrency', '1', '--json'];
    run.push('--out', path.join(stack.dir, 'out-ctl'));
    const status = () => cliJson<BatchProgress>(['status', 'cli-ctl', '--json'], env());

    expect(await cliJson(run, env())).toEqual({ batchId: 'cli-ctl', attached: false });
    // The same command again attaches to the running batch instead of starting another.
    const attach = await cli(run, env());
    expect(attach.code, describeRun(run, attach)).toBe(0);
    expect(JSON.parse(attach.stdout)).toEqual({ batchId: 'cli-ctl', attached: true });
    expect(attach.stderr).toContain('attached to batch cli-ctl');

    const paused = await cliJson<BatchProgress>(['pause', 'cli-ctl', '--json'], env());
    expect(paused.status).toBe('paused');
    // Rows in flight finish; then nothing new starts while it is paused.
    const settled = await waitUntil(
      'the paused batch to have no row in flight',
      async () => {
        const p = await status();
        return p.inFlight === 0 ? p : undefined;
      },
      45_000,
    );
    expect(settled).toMatchObject({ status: 'paused', done: false, waiting: { kind: 'paused' } });
    expect(settled.started).toBeLessThan(rows);
    await sleep(1500);
    const still = await status();
    expect(still).toMatchObject({ status: 'paused', started: settled.started, inFlight: 0, counts: settled.counts });
    const text = await cli(['status', 'cli-ctl'], env());
    expect(text.stdout).toMatch(/^paused: .*waiting: paused \(paused from the command line\)/);

    const resumed = await cliJson<BatchProgress>(['resume', 'cli-ctl', '--json'], env());
    expect(resumed.status).toBe('running');
    await waitUntil(
      'the resumed batch to start another row',
      async () => ((await status()).started > settled.started ? true : undefined),
      45_000,
    );

    const cancelled = await cliJson<BatchProgress>(['cancel', 'cli-ctl', '--json'], env());
    expect(['cancelling', 'cancelled']).toContain(cancelled.status);
    let last: BatchProgress | undefined;
    const final = await waitUntil(
      'the cancelled batch to end',
      async () => {
        last = await status();
        return last.done ? last : undefined;
      },
      45_000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\nlast status: ${JSON.stringify(last)}\n${await rowStates('cli-ctl', rows)}`);
    });
    expect(final.status).toBe('cancelled');
    expect(final.started).toBeLessThan(rows);
    const c = final.counts;
    expect(c.succeeded + c.failed + c.unknown + c.cancelled + c.not_run).toBe(rows);
    expect(c.not_run).toBe(rows - final.started);
    // Only rows that started were ever submitted.
    const submitted = new Set(chargedKeys(stack.sim, 'cli-ctl').map((k) => rowOfKey('cli-ctl', k)));
    expect(submitted.size).toBeLessThanOrEqual(final.started);
    expect(stack.sim.charges.chargedTwice()).toEqual([]);

    const list = await cliJson<{ batchId: string; status: string }[]>(['ls', '--json'], env());
    expect(list).toContainEqual(expect.objectContaining({ batchId: 'cli-ctl', status: 'completed' }));
  });
});
