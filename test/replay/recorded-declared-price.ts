/**
 * The scenario of record-histories.ts for patch `declared-price-one-at-a-time`: a spend cap that counts on a price
 * the user gave, on a service that never shows a cost. No record confirms the price, so after the canary each row
 * waits for the one in flight: three rows, one at a time.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { defaultServiceConfig } from '../../src/config/service-config';
import { batchWorkflowId } from '../../src/model';
import { DEMO_API_KEY, startSimulator } from '../../src/simulator';
import { createWorker } from '../../src/worker';
import { batchWorkflow, type BatchWorkflowInput } from '../../src/workflows';
import { DECLARED_PRICE_ONE_AT_A_TIME } from '../../src/workflows/batch-workflow';
import { lazyTempLedger } from '../helpers/ledger';
import { hasPatch } from './recorded-scenarios';

type Save = (name: string, handle: WorkflowHandle, runId?: string) => Promise<void>;

export async function recordDeclaredPrice(ctx: {
  client: Client;
  native: NativeConnection;
  outputRoot: string;
  save: Save;
}): Promise<void> {
  const sim = await startSimulator({
    pricing: { fields: 'hidden' },
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000 },
    safety: { genericDeclineProbability: 0 },
  });
  const taskQueue = 'replay-recording-declared-price';
  try {
    const worker = await createWorker({
      connection: ctx.native,
      taskQueue,
      activityDeps: {
        config: defaultServiceConfig({ baseUrl: sim.baseUrl, minPollIntervalMs: 100 }),
        apiKey: () => DEMO_API_KEY,
        outputRoot: ctx.outputRoot,
        temporalClient: ctx.client,
        ledger: lazyTempLedger(),
      },
    });
    const file = path.join(ctx.outputRoot, 'declared-price.csv');
    const rows = Array.from({ length: 3 }, (_, i) => `d${i + 1},a glass bottle on a shelf number ${i + 1}`);
    await writeFile(file, `id,prompt\n${rows.join('\n')}\n`);
    const input: BatchWorkflowInput = {
      batchId: 'replay-declared',
      file,
      outDir: 'declared',
      defaultModel: 'flux-dev',
      concurrency: 3,
      prices: { 'flux-dev': 0.04 },
      spendCapUsd: 1,
    };
    const handle = await ctx.client.workflow.start(batchWorkflow, {
      taskQueue,
      workflowId: batchWorkflowId('replay-declared'),
      args: [input],
    });
    const progress = await worker.runUntil(handle.result());
    if (progress.counts.succeeded !== 3 || progress.unconfirmedUsd !== 0.12) {
      throw new Error(`declared-price batch: ${JSON.stringify(progress)}`);
    }
    if (!hasPatch(await handle.fetchHistory(), DECLARED_PRICE_ONE_AT_A_TIME)) {
      throw new Error('declared-price batch: no marker');
    }
    await ctx.save('batch-declared-price-one-at-a-time', handle);
  } finally {
    await sim.close();
  }
}
