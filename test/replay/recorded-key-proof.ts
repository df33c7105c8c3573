/**
 * The scenario of record-histories.ts for patch `canary-proves-key`: a batch whose canary meets a service that reads
 * the idempotency key from another header than the worker's, so ignores it. The canary's check pays a second
 * creation and the batch pauses; a worker with the header the service reads takes over, the batch is resumed, its
 * next row proves the key and the batch fans out.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { defaultServiceConfig } from '../../src/config/service-config';
import { batchWorkflowId, KeyOutcome, type RowRecord } from '../../src/model';
import { DEMO_API_KEY, startSimulator } from '../../src/simulator';
import { createWorker } from '../../src/worker';
import { batchWorkflow, progressQuery, resumeSignal, type BatchWorkflowInput } from '../../src/workflows';
import { CANARY_PROVES_KEY } from '../../src/workflows/batch-rows';
import { lazyTempLedger } from '../helpers/ledger';
import { hasPatch, waitFor } from './recorded-scenarios';

type Save = (name: string, handle: WorkflowHandle, runId?: string) => Promise<void>;

export async function recordKeyNotHonoured(ctx: {
  client: Client;
  native: NativeConnection;
  outputRoot: string;
  save: Save;
}): Promise<void> {
  const sim = await startSimulator({
    idempotency: { header: 'X-Request-Key' },
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000 },
    safety: { genericDeclineProbability: 0 },
  });
  const taskQueue = 'replay-recording-key-proof';
  const ledger = lazyTempLedger();
  const worker = (idempotencyHeader?: string) =>
    createWorker({
      connection: ctx.native,
      taskQueue,
      activityDeps: {
        config: defaultServiceConfig({
          baseUrl: sim.baseUrl,
          minPollIntervalMs: 100,
          ...(idempotencyHeader ? { idempotencyHeader } : {}),
        }),
        apiKey: () => DEMO_API_KEY,
        outputRoot: ctx.outputRoot,
        temporalClient: ctx.client,
        ledger,
      },
    });
  try {
    const file = path.join(ctx.outputRoot, 'key-proof.csv');
    const rows = Array.from({ length: 4 }, (_, i) => `k${i + 1},a paper boat on a pond number ${i + 1}`);
    await writeFile(file, `id,prompt\n${rows.join('\n')}\n`);
    const input: BatchWorkflowInput = { batchId: 'replay-key', file, outDir: 'key', defaultModel: 'flux-dev' };
    const handle = await ctx.client.workflow.start(batchWorkflow, {
      taskQueue,
      workflowId: batchWorkflowId('replay-key'),
      args: [input],
    });
    await (
      await worker()
    ).runUntil(() =>
      waitFor(async () => {
        const p = await handle.query(progressQuery);
        return p.waiting?.kind === 'stop_loss' && p.inFlight === 0;
      }),
    );
    const progress = await (
      await worker('X-Request-Key')
    ).runUntil(async () => {
      await handle.signal(resumeSignal);
      return handle.result();
    });
    if (progress.counts.succeeded !== 4 || progress.canary !== 'passed') {
      throw new Error(`key-proof batch: ${JSON.stringify(progress)}`);
    }
    const canary = ctx.client.workflow.getHandle('replay-key/k1');
    const record = (await canary.result()) as RowRecord;
    if (record.keys[0]?.outcome !== KeyOutcome.Duplicate || record.keyCheck?.result !== 'not_honoured') {
      throw new Error(`key-proof canary: ${JSON.stringify(record)}`);
    }
    if (!hasPatch(await handle.fetchHistory(), CANARY_PROVES_KEY)) throw new Error('key-proof batch: no marker');
    await ctx.save('batch-canary-key-not-honoured', handle);
    await ctx.save('prompt-canary-key-not-honoured', canary);
  } finally {
    await sim.close();
  }
}
