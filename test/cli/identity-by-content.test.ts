import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { BatchProgress } from '../../src/model';
import { WorkerProcess, baseEnv, cli, describeRun, ensureDistIsFresh, readCsv, waitUntil } from './helpers';
import { defaultLedger } from '../helpers/ledger';
import { KEYS_KEPT_MS, keysForgotten } from '../helpers/keys-forgotten';

/**
 * What was paid is remembered by what was asked, in one store (here this file's default: the user data folder test
 * setup gives it), whatever the working directory, the file's name, or Temporal's memory. Each scenario of issue 29
 * that paid twice before: the same command from another directory after Temporal's state is gone, the same file
 * renamed, one row added, another --model, and the results' advice while a batch is open.
 *
 * The simulator forgets a key after a few seconds (KEYS_KEPT_MS; the service's idempotency window, 24 h in life), and
 * each batch run again waits that out: a key sent again would be charged again, so every "no new charge" below is the
 * store's doing, not the service's.
 */

let dir: string;
let sim: Simulator;
let server: DevServer | undefined;
let worker: WorkerProcess | undefined;
let temporalEnv: Record<string, string>;
const TASK_QUEUE = 'imagebatch-identity-content';

async function startTemporalAndWorker(): Promise<void> {
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  const temporal = { TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: TASK_QUEUE };
  worker = await WorkerProcess.start({
    env: baseEnv({
      ...temporal,
      IMAGEGEN_BASE_URL: sim.baseUrl,
      IMAGEGEN_API_KEY: DEMO_API_KEY,
      IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
    }),
  });
  temporalEnv = baseEnv(temporal);
}

async function stopTemporalAndWorker(): Promise<void> {
  await worker?.stop();
  await server?.stop();
  worker = undefined;
  server = undefined;
}

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-content-'));
  sim = await startSimulator({
    seed: 29,
    accounts: [{ id: 'acct', models: ['flux-dev', 'flux-schnell'], keys: [{ id: 'key', key: DEMO_API_KEY }] }],
    generation: { queuedMs: { minMs: 20, maxMs: 50 }, runningMs: { minMs: 100, maxMs: 300 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
    safety: { genericDeclineProbability: 0 },
    idempotency: { ttlMs: KEYS_KEPT_MS },
  });
  await startTemporalAndWorker();
});

afterAll(async () => {
  await stopTemporalAndWorker();
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const PROMPTS = [
  'id,prompt',
  'r1,a lighthouse on a basalt cliff at dusk',
  'r2,a red fox curled up in fresh snow',
  'r3,a bowl of ramen with steam rising',
  'r4,a tram crossing a bridge in the rain',
];

/** Creations charged and kept (net of refunds): what the account paid for. */
const paid = () => sim.charges.byCreation().filter((c) => c.netUsd > 0).length;

/** A folder of its own, with `name` holding `lines`. */
async function folderWith(name: string, lines: readonly string[]): Promise<string> {
  const folder = await mkdtemp(path.join(dir, 'cwd-'));
  await writeFile(path.join(folder, name), `${lines.join('\n')}\n`);
  return folder;
}

/** `imagebatch run FILE ...` from `cwd`, followed to its end, then `imagebatch results` of its batch. */
async function runIn(cwd: string, file: string, ...more: string[]) {
  const args = ['run', file, '--model', 'flux-dev', '--follow', '--json', ...more];
  const r = await cli(args, { env: temporalEnv, cwd, timeoutMs: 60_000 });
  expect(r.code, `${describeRun(args, r)}\nworker:\n${worker?.output().slice(-3000)}`).toBe(0);
  const progress = JSON.parse(r.stdout) as BatchProgress;
  const results = await cli(['results', progress.batchId], { env: temporalEnv, cwd });
  expect(results.code, describeRun(['results', progress.batchId], results)).toBe(0);
  return { progress, stderr: r.stderr };
}

/** The rows of a batch's results.csv in its default folder under `cwd`. */
async function resultsOf(cwd: string, batchId: string) {
  const out = path.join(cwd, 'out', batchId);
  const rows = await readCsv(path.join(out, 'results.csv'));
  for (const row of rows) {
    for (const image of (row.images ?? '').split(' ').filter(Boolean)) {
      expect((await stat(path.join(out, image))).size, `${batchId}/${image}`).toBeGreaterThan(0);
    }
  }
  return rows;
}

describe('what was paid is remembered by what was asked', { timeout: 180_000 }, () => {
  let first: string;

  it('the same command from another directory, after Temporal forgot the batch: nothing paid again', async () => {
    first = await folderWith('prompts.csv', PROMPTS);
    const ran = await runIn(first, 'prompts.csv');
    expect(ran.stderr).toContain('4 rows: 0 already paid (reused, $0.00), 4 new (about $0.16 at the catalog price)');
    expect(ran.progress.counts).toMatchObject({ succeeded: 4 });
    expect(paid()).toBe(4);

    // Temporal's state is gone (retention passed, or a new server); the store is the user's, not the folder's.
    await stopTemporalAndWorker();
    await startTemporalAndWorker();
    await keysForgotten(sim);
    const elsewhere = await folderWith('prompts.csv', PROMPTS);
    const again = await runIn(elsewhere, 'prompts.csv');
    expect(again.progress.counts).toMatchObject({ succeeded: 4 });
    expect(paid()).toBe(4);
    expect(sim.charges.chargedTwice()).toEqual([]);
    // Its results and images are in the folder it ran from.
    expect((await resultsOf(elsewhere, 'prompts')).map((r) => r.state)).toEqual(Array(4).fill('succeeded'));
  });

  it('the same file under another name: every row reused from the store, nothing paid', async () => {
    const renamed = await folderWith('renamed.csv', PROMPTS);
    const ran = await runIn(renamed, 'renamed.csv');
    expect(ran.stderr).toContain('4 rows: 4 already paid (reused, $0.00), 0 new ($0.00)');
    expect(ran.progress.counts).toMatchObject({ reused: 4, succeeded: 0 });
    expect(ran.progress.spentUsd).toBe(0);
    expect(paid()).toBe(4);
    const rows = await resultsOf(renamed, 'renamed');
    expect(rows.map((r) => [r.state, r.charged_usd, r.idempotency_keys])).toEqual(
      Array(4).fill(['reused', '0.0000', '']),
    );
    // Each row names the creation that served it.
    expect(rows.every((r) => /^cr_/.test(r.creation_ids ?? ''))).toBe(true);
  });

  it('one row added to the file: exactly one new charge, under a batch of its own', async () => {
    await keysForgotten(sim);
    const ran = await runIn(first, 'prompts.csv');
    expect(ran.progress.counts).toMatchObject({ succeeded: 4 }); // the same content: the same batch, as it ended
    await writeFile(path.join(first, 'prompts.csv'), `${[...PROMPTS, 'r5,a paper boat on a puddle'].join('\n')}\n`);
    const edited = await runIn(first, 'prompts.csv');
    expect(edited.stderr).toContain('5 rows: 4 already paid (reused, $0.00), 1 new (about $0.04 at the catalog price)');
    const batchId = /this one is batch (\S+)/.exec(edited.stderr)?.[1];
    expect(batchId, edited.stderr).toMatch(/^prompts-[0-9a-f]{8}$/);
    expect(edited.progress.counts).toMatchObject({ reused: 4, succeeded: 1 });
    expect(paid()).toBe(5);
  });

  it('another --model: a new batch (another request, paid), and the first batch results are untouched', async () => {
    const before = await readFile(path.join(first, 'out', 'prompts', 'results.csv'), 'utf8');
    const args = ['run', 'prompts.csv', '--model', 'flux-schnell', '--follow', '--json'];
    const r = await cli(args, { env: temporalEnv, cwd: first, timeoutMs: 60_000 });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(r.stderr).toMatch(/this one is batch prompts-[0-9a-f]{8}/);
    expect(paid()).toBe(10);
    expect(await readFile(path.join(first, 'out', 'prompts', 'results.csv'), 'utf8')).toBe(before);
    expect(sim.charges.chargedTwice()).toEqual([]);
  });

  it('results of a batch paused at its cap offer nothing to run; its errors.csv is refused while it is open', async () => {
    const lines = [
      'id,prompt,model',
      'bad,a study of light,sdxl', // a model the account lacks: rejected, nothing paid
      ...Array.from({ length: 6 }, (_, i) => `c${i},a capped batch picture number ${i},`),
    ];
    const folder = await folderWith('capped.csv', lines);
    const paidBefore = paid();
    const start = ['run', 'capped.csv', '--model', 'flux-dev', '--concurrency', '1', '--spend-cap', '0.08'];
    start.push('--price', 'sdxl=0.02');
    const started = await cli(start, { env: temporalEnv, cwd: folder });
    expect(started.code, describeRun(start, started)).toBe(0);
    // Two rows fit under the cap; the batch pauses before the third.
    const status = ['status', 'capped', '--json'];
    await waitUntil(
      'the batch to pause at its cap',
      async () => {
        const r = await cli(status, { env: temporalEnv });
        return r.code === 0 && (JSON.parse(r.stdout) as BatchProgress).status === 'paused' ? true : undefined;
      },
      60_000,
    );
    const results = await cli(['results', 'capped'], { env: temporalEnv, cwd: folder });
    expect(results.code, describeRun(['results', 'capped'], results)).toBe(0);
    expect(results.stdout).toContain('batch capped is still open');
    expect(results.stdout).not.toContain('imagebatch run');
    const out = path.join(folder, 'out', 'capped');
    const errors = await readCsv(path.join(out, 'errors.csv'));
    expect(errors.map((e) => [e.id, e.advice, e.batch_id])).toEqual([['bad', 'fix_row', 'capped']]);

    // Running that errors.csv while the batch is open is refused, nothing started.
    const retry = ['run', path.join(out, 'errors.csv'), '--batch-id', 'capped-retry'];
    const refused = await cli(retry, { env: temporalEnv, cwd: folder });
    expect(refused.code, describeRun(retry, refused)).toBe(3);
    expect(refused.stderr).toContain('holds rows of batch capped, which is still open');
    // The whole file again, followed: its model the account lacks stops it before anything starts (exit 3).
    const whole = ['run', 'capped.csv', '--model', 'flux-dev', '--batch-id', 'twin', '--follow', '--json'];
    const refusedModel = await cli(whole, { env: temporalEnv, cwd: folder, timeoutMs: 60_000 });
    expect(refusedModel.code, describeRun(whole, refusedModel)).toBe(3);
    expect(refusedModel.stderr).toContain('model sdxl (1 row) is not available to this account');
    // Its other rows, under another id while it is paused: served by what was paid.
    await writeFile(path.join(folder, 'twin.csv'), `${[lines[0], ...lines.slice(2)].join('\n')}\n`);
    const twinArgs = ['run', 'twin.csv', '--model', 'flux-dev', '--batch-id', 'twin', '--follow', '--json'];
    const twin = await cli(twinArgs, { env: temporalEnv, cwd: folder, timeoutMs: 60_000 });
    expect(twin.code, describeRun(twinArgs, twin)).toBe(0);
    expect((JSON.parse(twin.stdout) as BatchProgress).counts).toMatchObject({ reused: 2, succeeded: 4 });
    // The capped batch resumes: its rows not started are served by the twin's; nothing is paid twice.
    const resume = ['resume', 'capped', '--spend-cap', '1'];
    const resumed = await cli(resume, { env: temporalEnv });
    expect(resumed.code, describeRun(resume, resumed)).toBe(0);
    await waitUntil(
      'the capped batch to end',
      async () => {
        const r = await cli(status, { env: temporalEnv });
        return r.code === 0 && (JSON.parse(r.stdout) as BatchProgress).done ? true : undefined;
      },
      60_000,
    );
    expect(paid() - paidBefore).toBe(6);
    expect(sim.charges.chargedTwice()).toEqual([]);
    // Once it has ended, its errors.csv may run; followed, its row's model, which the account lacks, stops it before
    // anything is sent: exit 3.
    await cli(['results', 'capped'], { env: temporalEnv, cwd: folder });
    const after = await cli([...retry, '--follow', '--json', '--model', 'flux-dev'], {
      env: temporalEnv,
      cwd: folder,
      timeoutMs: 60_000,
    });
    expect(after.code, describeRun(retry, after)).toBe(3);
    expect(after.stderr).toContain('model sdxl (1 row) is not available to this account');
    expect(paid() - paidBefore).toBe(6);
  });

  it('ledger show sums what was paid, ledger export lists every key, ledger check asks the service by creation id', async () => {
    const show = ['ledger', 'show', '--json'];
    const shown = await cli(show, { env: temporalEnv });
    expect(shown.code, describeRun(show, shown)).toBe(0);
    const { rows } = JSON.parse(shown.stdout) as { rows: { group: string; paid: number; paidUsd: number }[] };
    // Every creation the simulator kept is a paid key of the store, and the same dollars.
    expect(rows.reduce((n, r) => n + r.paid, 0)).toBe(paid());
    const kept = sim.charges.byCreation().filter((c) => c.netUsd > 0);
    expect(rows.reduce((n, r) => n + r.paidUsd, 0)).toBeCloseTo(
      kept.reduce((n, c) => n + c.netUsd, 0),
      6,
    );
    const human = await cli(['ledger', 'show', '--by', 'day'], { env: temporalEnv });
    expect(human.stdout).toMatch(/^day\s+keys\s+paid/m);

    const file = path.join(dir, 'keys.csv');
    const exported = await cli(['ledger', 'export', file], { env: temporalEnv });
    expect(exported.code, describeRun(['ledger', 'export'], exported)).toBe(0);
    const keys = await readCsv(file);
    expect(keys.filter((k) => k.creation_id).length).toBeGreaterThanOrEqual(paid());
    expect(Object.keys(keys[0]!)).toEqual([
      'batch_id',
      'row_id',
      'idempotency_key',
      'fingerprint',
      'first_sent_at',
      'outcome',
      'creation_id',
      'cost_usd',
      'error',
    ]);

    const check = ['ledger', 'check', '--json'];
    const requestsBefore = sim.charges.entries().length;
    const agreed = await cli(check, { env: temporalEnv, timeoutMs: 60_000 });
    expect(agreed.code, describeRun(check, agreed)).toBe(0);
    const summary = JSON.parse(agreed.stdout) as { checked: number; agree: number; findingCount: number };
    expect(summary.checked).toBeGreaterThanOrEqual(paid());
    expect(summary).toMatchObject({ findingCount: 0 });
    expect(sim.charges.entries().length).toBe(requestsBefore); // a GET by id charges nothing

    // A cost the store got wrong is found, naming the key; exit 1.
    const store = await defaultLedger();
    const wrong = keys.find((k) => k.outcome === 'succeeded' && k.cost_usd)!;
    await store.append([
      {
        type: 'accepted',
        batchId: wrong.batch_id!,
        rowId: wrong.row_id!,
        idempotencyKey: wrong.idempotency_key!,
        creationId: wrong.creation_id!,
        costUsd: 9.99,
      },
    ]);
    await store.close();
    const differs = await cli(['ledger', 'check', '--batch', wrong.batch_id!], { env: temporalEnv, timeoutMs: 60_000 });
    expect(differs.code, describeRun(['ledger', 'check'], differs)).toBe(1);
    expect(differs.stdout).toContain(`${wrong.idempotency_key} (${wrong.creation_id}): the store says it cost $9.99`);
  });
});
