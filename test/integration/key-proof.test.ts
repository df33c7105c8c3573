import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, afterEach, describe, expect, it } from 'vitest';
import { settingsFingerprint } from '../../src/activities/service-proof';
import { defaultServiceConfig } from '../../src/config/service-config';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { cancelSignal, resumeSignal } from '../../src/workflows';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';
import { progressUntil, resultRows, simBatch } from './sim-batch';

/**
 * The canary proves the idempotency key (issue #42): a service that ignores the key (`idempotency.header: null`), or
 * reads it where the worker does not put it, pauses the batch at its canary, having paid one extra creation at most,
 * before any other row is sent; once the worker carries the key where the service reads it, a resume sends the next
 * row alone, it proves the key, and the batch fans out.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
let sim: Simulator | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-keyproof-'));
});
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function startSim(idempotency: SimulatorConfigInput['idempotency']): Promise<Simulator> {
  return startSimulator({
    idempotency,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 200, maxMs: 400 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
}

const charges = (s: Simulator) => s.charges.entries().filter((e) => e.kind === 'charge');
const pausedByStopLoss = (p: { waiting?: { kind: string } }) => p.waiting?.kind === 'stop_loss';

describe('the canary proves the key', { timeout: 120_000 }, () => {
  it('a service that ignores the key: the batch pauses at its canary with one extra charge, no other row sent', async () => {
    sim = await startSim({ header: null });
    const batch = await simBatch(env, dir, 6);
    const worker = await batch.newWorker(sim);
    const paused = await worker.runUntil(async () => {
      const handle = await batch.start(worker);
      const p = await progressUntil(handle, (q) => pausedByStopLoss(q) && q.inFlight === 0);
      await handle.signal(cancelSignal);
      await handle.result();
      return p;
    });
    expect(paused.started).toBe(1);
    const trip = (paused.waiting as { trip: { breaker: string; message: string } }).trip;
    expect(trip.breaker).toBe('canary');
    expect(trip.message).toMatch(
      /^the service did not honour the idempotency key at header Idempotency-Key: every retry may pay twice; the check paid a second creation cr_\w+ \(\$0\.04\)\. set IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD to where the service reads the key, restart the worker, then resume/,
    );
    // Two creations of the canary's one key, both charged: the one extra charge; nothing for any other row.
    expect(charges(sim)).toHaveLength(2);
    expect(sim.charges.chargedTwice()).toEqual([
      expect.objectContaining({ idempotencyKey: `ib/${batch.batchId}/r1/a1`, netCharged: 2 }),
    ]);
    const rows = await resultRows(env, batch);
    const r1 = rows.r1!;
    expect(r1.keys.map((k) => [k.outcome, k.charged_usd])).toEqual([
      ['duplicate', 0.04],
      ['succeeded', 0.04],
    ]);
    expect(r1).toMatchObject({ state: 'succeeded', charged_usd: 0.08, net_usd: 0.08 });
    expect(r1.creation_ids).toHaveLength(2);
    expect(Object.values(rows).map((r) => r.state)).toEqual(['succeeded', ...Array<string>(5).fill('not_started')]);
    // The store counts the second creation: spend reports and budgets see $0.08.
    expect(await batch.ledger.summarize('batch', batch.batchId)).toEqual([
      expect.objectContaining({ paid: 2, paidUsd: 0.08 }),
    ]);
  });

  it('a key carried where the service does not read it pauses; carried where it does, the resumed batch fans out', async () => {
    sim = await startSim({ header: 'X-Request-Key' });
    const batch = await simBatch(env, dir, 6);
    const wrong = await batch.newWorker(sim);
    const handle = await wrong.runUntil(async () => {
      const h = await batch.start(wrong);
      await progressUntil(h, (q) => pausedByStopLoss(q) && q.inFlight === 0);
      return h;
    });
    expect(charges(sim)).toHaveLength(2);
    // The worker restarted with the header the service reads: the next row is sent alone and proves the key.
    const config = { idempotencyHeader: 'X-Request-Key' };
    const right = await batch.newWorker(sim, config);
    const final = await right.runUntil(async () => {
      await handle.signal(resumeSignal);
      return handle.result();
    });
    expect(final.counts.succeeded).toBe(6);
    expect(final.canary).toBe('passed');
    expect(charges(sim)).toHaveLength(7);
    expect(sim.charges.chargedTwice().map((k) => k.idempotencyKey)).toEqual([`ib/${batch.batchId}/r1/a1`]);
    // Its proof is recorded under the settings that carry the key where the service reads it.
    const proven = defaultServiceConfig({ baseUrl: sim.baseUrl, minPollIntervalMs: 200, ...config });
    expect(await batch.ledger.serviceProof(settingsFingerprint(proven))).toMatchObject({
      by: 'canary',
      rowId: 'r2',
    });
  });
});
