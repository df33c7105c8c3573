import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAGGING_READS_PROFILE, startSimulator, type Simulator } from '../../src/simulator';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';
import { resultRows, simBatch } from './sim-batch';

/**
 * Reads that lag writes (issue #42): a service behind a distributed store answers a poll of a creation it has just
 * accepted `404 ERR_NOT_FOUND` for up to 3 s (LAGGING_READS_PROFILE). Each such 404 is lag until proven otherwise:
 * the creation is polled again within IMAGEGEN_NOT_FOUND_WINDOW_MS, and each 404 is counted in the row's record.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
let sim: Simulator | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-lag-'));
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('reads that lag writes', { timeout: 120_000 }, () => {
  it('no row ends on a lagging 404: each creation is polled again until found, its 404s counted in the records', async () => {
    sim = await startSimulator({
      ...LAGGING_READS_PROFILE,
      generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 300, maxMs: 800 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
    });
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
});
