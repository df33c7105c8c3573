import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareBatch, startOrAttachBatch } from '../../src/cli/batches';
import { paidBeforeLine } from '../../src/cli/paid-before';
import { startSimulator, type Simulator } from '../../src/simulator';
import { paidRequestsWorkflow } from '../../src/workflows';
import { tempLedger } from '../helpers/ledger';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * The line said before a batch starts tells the truth when its batch id ran before (issue 43, point 4): a batch run
 * with --new-images and run again the same way sends nothing, and the line counts its rows as having run before, not
 * as new at a price. A tester saw "5 new (about $0.05)" for a batch that then sent nothing.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-estimate-rerun-'));
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the estimate of a batch id run again', () => {
  it('with --new-images: its rows that ran are said apart, none is new, and nothing is sent', async () => {
    const file = path.join(dir, 'prompts.csv');
    await writeFile(file, 'id,prompt,model\na,a red kite,sdxl\nb,a blue heron,sdxl\nc,a grey owl,flux-dev\n');
    const ledger = await tempLedger();
    const { worker, taskQueue } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'estimate',
      ledger,
    });
    const batchId = `e${randomUUID().slice(0, 8)}`;
    const { client } = env();
    try {
      await worker.runUntil(async () => {
        const options = { batchId, file, outDir: path.join(dir, 'out'), ledger: { newImages: true } };
        const first = await startOrAttachBatch({ client, taskQueue, ledger, prepared: await prepareBatch(options) });
        expect((await first.handle.result()).counts.succeeded).toBe(3);
        const charged = sim.charges.byCreation().length;
        expect(charged).toBe(3);

        const paid = await client.workflow.execute(paidRequestsWorkflow, {
          taskQueue,
          workflowId: `paid-before/${randomUUID()}`,
          args: [{ file, storeId: ledger.id, batchId, newImages: true }],
        });
        expect(paid.fresh).toEqual({});
        expect(paid.earlier).toEqual({ sdxl: { rows: 2, images: 2 }, 'flux-dev': { rows: 1, images: 1 } });
        expect(paidBeforeLine(paid, [], {}, true)).toBe(
          '3 rows: 3 ran before in this batch (counted from their records), 0 new (--new-images) ($0.00)',
        );

        const again = await startOrAttachBatch({ client, taskQueue, ledger, prepared: await prepareBatch(options) });
        await again.handle.result();
        expect(sim.charges.byCreation().length).toBe(charged);
      });
    } finally {
      await ledger.close();
    }
  }, 120_000);
});
