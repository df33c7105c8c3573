import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareBatch, startOrAttachBatch } from '../../src/cli/batches';
import { KeyOutcome, RowState } from '../../src/model';
import { startSimulator, type Simulator } from '../../src/simulator';
import { cancelSignal } from '../../src/workflows';
import { tempLedger } from '../helpers/ledger';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * A row cancelled while its creation runs keeps the creation id its key received (issue 43, point 4), in the record
 * the batch counts and in the store: the charge it holds is followed by that id, not left for reconcile to find. A
 * tester saw cancelled rows lose their creation id until `reconcile`.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cancelled-creation-'));
  sim = await startSimulator({
    // Long enough to be cancelled while polled.
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 60_000, maxMs: 60_000 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a row cancelled while its creation runs', () => {
  it('keeps its creation id and its charge, in the record and in the store', async () => {
    const file = path.join(dir, 'prompts.csv');
    await writeFile(file, 'id,prompt,model\na,a red kite over the dunes,sdxl\n');
    const ledger = await tempLedger();
    const { worker, taskQueue } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'cancelled-creation',
      ledger,
    });
    const batchId = `k${randomUUID().slice(0, 8)}`;
    const { client } = env();
    try {
      await worker.runUntil(async () => {
        const prepared = await prepareBatch({ batchId, file, outDir: path.join(dir, 'out') });
        const { handle } = await startOrAttachBatch({ client, taskQueue, ledger, prepared });
        // The creation is accepted and charged, and its row polls it.
        for (let i = 0; i < 100 && sim.charges.byCreation().length === 0; i++) await sleep(100);
        const [charge] = sim.charges.byCreation();
        expect(charge).toBeDefined();
        await sleep(500);
        await handle.signal(cancelSignal);
        const progress = await handle.result();
        expect(progress.counts.cancelled).toBe(1);
        // The batch counted the record put right: the charge is spent, not unknown.
        expect(progress.spentUsd).toBe(charge!.chargedUsd);
        expect(progress.unknownSpendRows ?? 0).toBe(0);

        const row = await ledger.row(batchId, 'a');
        expect(row?.record?.state).toBe(RowState.Cancelled);
        const key = row!.record!.keys[0]!;
        expect(key.creationId).toBe(charge!.creationId);
        expect(key.outcome).toBe(KeyOutcome.Accepted);
        expect(key.chargedUsd).toBe(charge!.chargedUsd);
        expect(row!.record!.creationIds).toEqual([charge!.creationId]);
        expect(sim.charges.byCreation()).toHaveLength(1);
      });
    } finally {
      await ledger.close();
    }
  }, 120_000);
});
