import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import type { ServiceConfig } from '../../src/api/service-config';
import type { LedgerStore } from '../../src/ledger';
import type { BatchProgress, StopLossOptions } from '../../src/model';
import type { Simulator } from '../../src/simulator';
import type { JsonlRecord } from '../../src/results/write';
import { progressQuery } from '../../src/workflows';
import { simulatorWorker } from '../helpers/temporal';

/** A batch of distinct prompts run on a worker of its own against a simulator, as `imagebatch run` starts it. */

export interface SimBatch {
  batchId: string;
  /** The folder of the file, the images and the results. */
  folder: string;
  out: string;
  ledger: LedgerStore;
  taskQueue: string;
  start: (worker: Worker) => Promise<Awaited<ReturnType<typeof startOrAttachBatch>>['handle']>;
}

/** Writes `rows` prompts and returns what starts their batch; `newWorker` makes a worker on its queue and store. */
export async function simBatch(
  env: () => TestWorkflowEnvironment,
  dir: string,
  rows: number,
  options: { stopLoss?: StopLossOptions; concurrency?: number } = {},
): Promise<SimBatch & { newWorker: (sim: Simulator, config?: Partial<ServiceConfig>) => Promise<Worker> }> {
  const folder = await mkdtemp(path.join(dir, 'run-'));
  const file = path.join(folder, 'prompts.csv');
  const lines = Array.from({ length: rows }, (_, i) => `r${i + 1},"a watercolour harbour at dawn, number ${i + 1}"`);
  await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
  const out = path.join(folder, 'out');
  const batchId = `b${randomUUID().slice(0, 8)}`;
  let ledger: LedgerStore | undefined;
  const taskQueue = `sim-batch-${randomUUID()}`;
  const batch = {
    batchId,
    folder,
    out,
    taskQueue,
    get ledger(): LedgerStore {
      if (!ledger) throw new Error('no worker yet');
      return ledger;
    },
    newWorker: async (sim: Simulator, config: Partial<ServiceConfig> = {}) => {
      const made = await simulatorWorker(env, {
        baseUrl: sim.baseUrl,
        outputRoot: folder,
        prefix: 'sim-batch',
        taskQueue,
        config,
        ...(ledger ? { ledger } : {}),
      });
      ledger = made.ledger;
      return made.worker;
    },
    start: async () => {
      const { handle } = await startOrAttachBatch({
        ledger: batch.ledger,
        client: env().client,
        taskQueue,
        batchId,
        file,
        outDir: out,
        defaultModel: 'flux-dev',
        concurrency: options.concurrency ?? 4,
        ...(options.stopLoss ? { stopLoss: options.stopLoss } : {}),
      });
      return handle;
    },
  };
  return batch;
}

/** Polls the batch's progress until `until` holds (at most about 60 s). */
export async function progressUntil(
  handle: { query: (q: typeof progressQuery) => Promise<BatchProgress> },
  until: (p: BatchProgress) => boolean,
): Promise<BatchProgress> {
  for (let i = 0; i < 300; i++) {
    const p = await handle.query(progressQuery);
    if (until(p)) return p;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the batch never reached the state awaited');
}

/** Writes the batch's results and reads results.jsonl back, by row id. */
export async function resultRows(
  env: () => TestWorkflowEnvironment,
  batch: Pick<SimBatch, 'batchId' | 'ledger' | 'out'>,
): Promise<Record<string, JsonlRecord>> {
  await results({ client: env().client, batchId: batch.batchId, ledger: batch.ledger });
  const lines = (await readFile(path.join(batch.out, 'results.jsonl'), 'utf8')).trim().split('\n');
  return Object.fromEntries(lines.map((l) => JSON.parse(l) as JsonlRecord).map((r) => [r.row_id, r]));
}
