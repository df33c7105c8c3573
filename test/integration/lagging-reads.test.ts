import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAGGING_READS_PROFILE, startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { resumeSignal } from '../../src/workflows';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';
import { startCountingProxy } from './helpers';
import { progressUntil, resultRows, simBatch } from './sim-batch';

/**
 * Reads that lag writes (issue #42): a service behind a distributed store answers a poll of a creation it has just
 * accepted `404 ERR_NOT_FOUND` for up to 3 s (LAGGING_READS_PROFILE). Each such 404 is lag until proven otherwise:
 * the creation is polled again within IMAGEGEN_NOT_FOUND_WINDOW_MS, and each 404 is counted in the row's record.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
/** Each test's simulator, closed after the file: the tests run at the same time, each on its own queue. */
const sims: Simulator[] = [];
const started = async (sim: Promise<Simulator>): Promise<Simulator> => {
  sims.push(await sim);
  return sims.at(-1)!;
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-lag-'));
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * Reads that lag 6 s, longer than the window of 2 s the workers are given (polls about a second apart on the dev
 * server): each creation's key is sent again once the window passed, and the creation is found in the next window.
 */
const lagging = (idempotency?: SimulatorConfigInput['idempotency']) =>
  startSimulator({
    readLagMs: { minMs: 6_000, maxMs: 6_000 },
    ...(idempotency ? { idempotency } : {}),
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 300, maxMs: 800 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
const WINDOW = { notFoundWindowMs: 2_000, backoffBaseMs: 200, backoffMaxMs: 400, pollPlan: 'interval' as const };

describe.concurrent('reads that lag writes', { timeout: 120_000 }, () => {
  it('no row ends on a lagging 404: each creation is polled again until found, its 404s counted in the records', async () => {
    const sim = await started(
      startSimulator({
        ...LAGGING_READS_PROFILE,
        generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 300, maxMs: 800 } },
        limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
      }),
    );
    // Every breaker that would pause on unknown rows off: the batch runs to its end, whatever its rows end.
    const batch = await simBatch(env, dir, 12, { stopLoss: { canary: false, unknownRows: 0 } });
    const worker = await batch.newWorker(sim);
    const progress = await worker.runUntil(async () => (await batch.start(worker)).result());
    const rows = Object.values(await resultRows(env, batch));
    const lost = rows.filter((r) => r.error?.includes('accepted, then not found'));
    expect(lost.map((r) => `${r.row_id}: ${r.error}`)).toEqual([]);
    expect(progress.counts).toMatchObject({ succeeded: 12, unknown: 0 });
    // Polled before its store caught up, most creations were answered 404 first: each counted on its key.
    const counted = rows.flatMap((r) => r.keys.map((k) => k.not_found_polls ?? 0));
    expect(counted.filter((n) => n > 0).length).toBeGreaterThan(0);
    expect(sim.charges.chargedTwice()).toEqual([]);
  });

  it('past the window the key goes again: the service returns each creation, polled on until found', async () => {
    const sim = await started(lagging());
    const proxy = await startCountingProxy(sim.baseUrl);
    try {
      const batch = await simBatch(env, dir, 4);
      const worker = await batch.newWorker(sim, {
        ...WINDOW,
        notFoundWindowMs: 2_500,
        pollPlan: 'interval',
        baseUrl: proxy.baseUrl,
      });
      const progress = await worker.runUntil(async () => (await batch.start(worker)).result());
      expect(progress.counts).toMatchObject({ succeeded: 4, unknown: 0 });
      expect(sim.charges.chargedTwice()).toEqual([]);
      expect(sim.charges.entries().filter((e) => e.kind === 'charge')).toHaveLength(4);
      // Each key went three times at most: its submission, the canary's check (one row), its replay.
      expect(proxy.statuses.get(202)).toBe(4 + 1 + 4);
    } finally {
      await proxy.close();
    }
  });

  it('a service that did not keep the key: its replay makes a new creation, the batch stops, the row ends lost', async () => {
    const sim = await started(lagging({ header: null }));
    const batch = await simBatch(env, dir, 1, { stopLoss: { canary: false } });
    const worker = await batch.newWorker(sim, WINDOW);
    const { paused, final } = await worker.runUntil(async () => {
      const handle = await batch.start(worker);
      const stopped = await progressUntil(handle, (p) => p.waiting?.kind === 'batch_stop');
      await handle.signal(resumeSignal);
      return { paused: stopped, final: await handle.result() };
    });
    const details = (paused.waiting as { details: { reason: string; message: string } }).details;
    expect(details.reason).toBe('key_not_kept');
    expect(details.message).toMatch(
      /^the service did not keep the idempotency key at header Idempotency-Key: creation cr_\w+ answered 404 ERR_NOT_FOUND for \d+ s \(\d+ polls\), and the key sent again made a new creation cr_\w+ \(\$0\.04\): every retry may pay twice/,
    );
    expect(final.counts).toMatchObject({ unknown: 1 });
    const r1 = (await resultRows(env, batch)).r1!;
    expect(r1.keys.map((k) => [k.outcome, k.charged_usd])).toEqual([
      ['duplicate', 0.04],
      ['lost', 0.04],
    ]);
    expect(r1.keys[1]?.not_found_polls).toBeGreaterThan(0);
    expect(r1.error).toContain('the service did not keep the idempotency key');
    expect(sim.charges.entries().filter((e) => e.kind === 'charge')).toHaveLength(2);
  });
});
