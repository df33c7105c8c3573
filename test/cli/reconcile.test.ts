import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, FaultKind, IdempotencyVariant } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { ReconcileOutcome } from '../../src/cli/commands/reconcile';
import { idempotencyKeyFor } from '../../src/model';
import { WorkerProcess, baseEnv, cli, describeRun, readCsv } from './helpers';
import { chargedKeys, startStack, type CliStack } from './stack';

/**
 * `imagebatch reconcile BATCH` against the simulator: the rows of a batch whose money is unresolved are resolved
 * with their own keys, never a new one, or reported. The simulator stores every judged response under its key
 * (variant b of contract-defaults.md), so a key that was accepted replays its 202 and one that met a 500 replays the
 * 500.
 *
 * Run 1's worker gives up on a key after one unknown outcome and saves no image (its download limit is 16 bytes):
 * - `acc`: accepted and charged, then the connection reset before the 202 came back: unknown;
 * - `never`: a 500 before any charge: unknown, nothing charged;
 * - `ok1`, `ok2`: generated and paid, images not saved: images_unsaved.
 */
let stack: CliStack;
const BATCH = 'rec';
const ROWS = [
  'id,prompt',
  'ok1,a lighthouse at dusk',
  'acc,[reset] a fox in snow',
  'never,[oops] a tram',
  'ok2,a bowl',
];
let file: string;
let out: string;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 5,
      generation: { queuedMs: { minMs: 20, maxMs: 50 }, runningMs: { minMs: 100, maxMs: 200 } },
      limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
      idempotency: { variant: IdempotencyVariant.AllJudged },
      scripts: [
        { match: '[reset]', faults: [FaultKind.ResetAfterCommit] },
        // The same for the last test's row (a script's faults are used once).
        { match: '[lost]', faults: [FaultKind.ResetAfterCommit] },
        { match: '[oops]', faults: [FaultKind.InternalBeforeCharge] },
        { match: '[slow]', faults: [{ kind: FaultKind.Slow, delayMs: 8_000 }] },
      ],
    },
    minPollIntervalMs: 150,
    workerEnv: { IMAGEGEN_MAX_AMBIGUOUS_TRIES: '1', IMAGEGEN_MAX_DOWNLOAD_BYTES: '16' },
  });
  file = path.join(stack.dir, 'rec.csv');
  out = path.join(stack.dir, 'out-rec');
  await writeFile(file, `${ROWS.join('\n')}\n`);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const env = () => ({ env: stack.cliEnv, timeoutMs: 90_000 });
const key = (rowId: string) => idempotencyKeyFor(BATCH, rowId, 1);
const charges = (rowId: string) => chargedKeys(stack.sim, BATCH).filter((k) => k === key(rowId)).length;

async function reconcile(): Promise<{ code: number | null; outcome: ReconcileOutcome }> {
  const args = ['reconcile', BATCH, '--json'];
  const r = await cli(args, env());
  expect([0, 1], describeRun(args, r)).toContain(r.code);
  return { code: r.code, outcome: JSON.parse(r.stdout) as ReconcileOutcome };
}

async function states(): Promise<Record<string, string>> {
  const rows = await readCsv(path.join(out, 'results.csv'));
  return Object.fromEntries(rows.map((r) => [r.row_id!, r.state!]));
}

describe('imagebatch reconcile', { timeout: 180_000 }, () => {
  it('resolves unknown and unsaved rows with their own keys, reports what it cannot, and never pays twice', async () => {
    const args = [
      'run',
      file,
      '--batch-id',
      BATCH,
      '--model',
      'flux-dev',
      '--out',
      out,
      '--follow',
      '--json',
      '--stop-loss',
      'off',
    ];
    const run = await cli(args, env());
    // No row succeeded (each is unknown or unsaved): exit 1.
    expect(run.code, describeRun(args, run)).toBe(1);
    expect(await cli(['results', BATCH], env()).then((r) => r.code)).toBe(0);
    expect(await states()).toEqual({ ok1: 'images_unsaved', acc: 'unknown', never: 'unknown', ok2: 'images_unsaved' });
    const unresolved = await readCsv(path.join(out, 'unresolved.csv'));
    expect(unresolved.map((r) => r.id).sort()).toEqual(['acc', 'never', 'ok1', 'ok2']);
    expect([charges('ok1'), charges('acc'), charges('never'), charges('ok2')]).toEqual([1, 1, 0, 1]);
    // None of them is in errors.csv, and unresolved.csv run as a batch is refused: nothing sent, nothing charged.
    expect(await readCsv(path.join(out, 'errors.csv'))).toEqual([]);
    const chargesBefore = chargedKeys(stack.sim, BATCH).length;
    const again = ['run', path.join(out, 'unresolved.csv'), '--batch-id', 'rec-again', '--model', 'flux-dev'];
    const refused = await cli([...again, '--out', path.join(stack.dir, 'out-again')], env());
    expect(refused.code, describeRun(again, refused)).toBe(3);
    expect(refused.stderr).toContain('may have been paid');
    expect(chargedKeys(stack.sim, 'rec-again')).toEqual([]);
    expect(chargedKeys(stack.sim, BATCH)).toHaveLength(chargesBefore);

    // A worker with ordinary settings (a replayed 500 is still unknown after two tries).
    await stack.restartWorker({ IMAGEGEN_MAX_AMBIGUOUS_TRIES: '2', IMAGEGEN_BACKOFF_BASE_MS: '50' });
    const first = await reconcile();
    expect(first.code).toBe(1); // a row is still reported
    const byRow = Object.fromEntries(first.outcome.summary.rows.map((r) => [r.rowId, r]));
    expect(first.outcome.summary).toMatchObject({ examined: 4, resolved: 3, reported: 1 });
    expect(byRow.acc).toMatchObject({ before: 'unknown', after: 'succeeded', resolved: true });
    expect(byRow.ok1).toMatchObject({ before: 'images_unsaved', after: 'succeeded', resolved: true });
    expect(byRow.never).toMatchObject({ before: 'unknown', after: 'unknown', resolved: false });
    // No new charge for anything: acc's key was replayed, the unsaved rows' creations fetched again.
    expect([charges('ok1'), charges('acc'), charges('never'), charges('ok2')]).toEqual([1, 1, 0, 1]);
    expect(new Set(chargedKeys(stack.sim, BATCH))).toEqual(new Set([key('ok1'), key('acc'), key('ok2')]));
    expect(await states()).toEqual({ ok1: 'succeeded', acc: 'succeeded', never: 'unknown', ok2: 'succeeded' });
    const results = await readCsv(path.join(out, 'results.csv'));
    for (const row of results.filter((r) => r.state === 'succeeded')) {
      expect(row.images).not.toBe('');
      for (const image of row.images!.split(' ')) expect(existsSync(path.join(out, image))).toBe(true);
    }
    expect((await readCsv(path.join(out, 'unresolved.csv'))).map((r) => r.id)).toEqual(['never']);

    // Past the service's idempotency window, the key that never got an answer is reported: no new key stored, no charge
    // (that nothing is sent at all is counted request by request in test/activities/ledger-journal.test.ts).
    await stack.restartWorker({ IMAGEGEN_IDEMPOTENCY_WINDOW_MS: '1000' });
    const submissionsBefore = stack.sim.stats().idempotencyEntries;
    const second = await reconcile();
    expect(second.code).toBe(1);
    expect(second.outcome.summary).toMatchObject({ examined: 1, resolved: 0, reported: 1 });
    expect(second.outcome.summary.rows[0]?.note).toContain('idempotency window');
    expect(stack.sim.stats().idempotencyEntries).toBe(submissionsBefore);
    expect(charges('never')).toBe(0);
  });

  it('refuses a batch that still runs: its rows are resolving their own keys', async () => {
    const slowFile = path.join(stack.dir, 'slow.csv');
    await writeFile(slowFile, 'id,prompt\ns1,[slow] a heron in the reeds\n');
    const start = [
      'run',
      slowFile,
      '--batch-id',
      'rec-slow',
      '--model',
      'flux-dev',
      '--out',
      path.join(stack.dir, 'o'),
    ];
    expect((await cli(start, env())).code).toBe(0);
    const args = ['reconcile', 'rec-slow'];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(1);
    expect(r.stderr).toContain('batch rec-slow is still running: reconcile it once it has ended');
  });

  it('after Temporal has forgotten the batch: from the ledger store alone, no new charge', async () => {
    const GONE = 'rec-gone';
    const goneFile = path.join(stack.dir, 'gone.csv');
    const goneOut = path.join(stack.dir, 'out-gone');
    await writeFile(goneFile, 'id,prompt\ng1,a heron at dawn\ng2,[lost] a kite over the dunes\n');
    // As in the first test: an unknown outcome is given up after one try, and no image is saved.
    await stack.restartWorker({ IMAGEGEN_MAX_AMBIGUOUS_TRIES: '1', IMAGEGEN_MAX_DOWNLOAD_BYTES: '16' });
    const args = [
      'run',
      goneFile,
      '--batch-id',
      GONE,
      '--model',
      'flux-dev',
      '--out',
      goneOut,
      '--follow',
      '--json',
      '--stop-loss',
      'off',
    ];
    const run = await cli(args, env());
    // No row succeeded (each is unknown or unsaved): exit 1.
    expect(run.code, describeRun(args, run)).toBe(1);
    const goneStates = async () => {
      const rows = await readCsv(path.join(goneOut, 'results.csv'));
      return Object.fromEntries(rows.map((r) => [r.row_id!, r.state!]));
    };
    expect(await cli(['results', GONE], env()).then((r) => r.code)).toBe(0);
    expect(await goneStates()).toEqual({ g1: 'images_unsaved', g2: 'unknown' });
    const chargedBefore = chargedKeys(stack.sim, GONE).sort();
    expect(chargedBefore).toEqual([idempotencyKeyFor(GONE, 'g1', 1), idempotencyKeyFor(GONE, 'g2', 1)]);

    // Temporal's retention passes: a new, empty dev server and a worker on it (ordinary settings), same service.
    const fresh = await DevServer.start({ ...devServerBase(), uiPort: false });
    let worker: WorkerProcess | undefined;
    try {
      const temporal = { TEMPORAL_ADDRESS: fresh.address, TEMPORAL_TASK_QUEUE: 'imagebatch-cli' };
      worker = await WorkerProcess.start({
        env: baseEnv({
          ...temporal,
          IMAGEGEN_BASE_URL: stack.sim.baseUrl,
          IMAGEGEN_API_KEY: DEMO_API_KEY,
          IMAGEGEN_MIN_POLL_INTERVAL_MS: '150',
        }),
      });
      const freshEnv = { env: baseEnv(temporal), timeoutMs: 90_000 };
      const status = await cli(['status', GONE], freshEnv);
      expect(status.code, describeRun(['status', GONE], status)).toBe(1);

      // From the store alone (no --out): both rows resolved, results.csv written again in the batch's folder.
      await rm(path.join(goneOut, 'results.csv'));
      const withOut = ['reconcile', GONE, '--json'];
      const r = await cli(withOut, freshEnv);
      expect(r.code, `${describeRun(withOut, r)}\nworker:\n${worker.output().slice(-4000)}`).toBe(0);
      const outcome = JSON.parse(r.stdout) as ReconcileOutcome;
      expect(outcome.summary).toMatchObject({ examined: 2, resolved: 2, reported: 0 });
      expect(outcome.written.resultsCsv).toBe(path.join(goneOut, 'results.csv'));
      expect(chargedKeys(stack.sim, GONE).sort()).toEqual(chargedBefore);
      expect(await goneStates()).toEqual({ g1: 'succeeded', g2: 'succeeded' });
      for (const row of await readCsv(path.join(goneOut, 'results.csv'))) {
        expect(row.images).not.toBe('');
        for (const image of row.images!.split(' ')) expect(existsSync(path.join(goneOut, image))).toBe(true);
      }
      expect(await readCsv(path.join(goneOut, 'unresolved.csv'))).toEqual([]);
    } finally {
      await worker?.stop();
      await fresh.stop();
    }
  });
});
