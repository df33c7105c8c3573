import type { Client } from '@temporalio/client';
import { cancelSignal, pauseSignal, resumeSignal } from '../../workflows';
import { batchWorkflowId, type BatchProgress, type ResumeOptions } from '../../model';
import { BatchNoAnswerError, queryProgress } from '../batches';

/** Where a batch is: its live progress while it runs, its result once it has ended. */
export async function batchStatus(client: Client, batchId: string): Promise<BatchProgress> {
  const handle = client.workflow.getHandle(batchWorkflowId(batchId));
  const description = await handle.describe();
  // A running batch answers through a worker: without one, a clear error after QUERY_TIMEOUT_MS.
  if (description.status.name === 'RUNNING') return queryProgress(handle, batchId);
  if (description.status.name === 'COMPLETED') return (await handle.result()) as BatchProgress;
  throw new Error(`batch ${batchId} ended as ${description.status.name.toLowerCase()}`);
}

export const BatchAction = { Pause: 'pause', Resume: 'resume', Cancel: 'cancel' } as const;
export type BatchAction = (typeof BatchAction)[keyof typeof BatchAction];

/** `imagebatch pause|resume|cancel BATCH`: a signal to the running batch; returns its progress after it. */
export async function controlBatch(
  client: Client,
  batchId: string,
  action: BatchAction,
  options: { reason?: string } & ResumeOptions = {},
): Promise<BatchProgress> {
  const handle = client.workflow.getHandle(batchWorkflowId(batchId));
  switch (action) {
    case BatchAction.Pause:
      await handle.signal(pauseSignal, options.reason ?? 'paused from the command line');
      break;
    case BatchAction.Resume:
      await handle.signal(resumeSignal, {
        ...(options.spendCapUsd === undefined ? {} : { spendCapUsd: options.spendCapUsd }),
        ...(options.prices && Object.keys(options.prices).length > 0 ? { prices: options.prices } : {}),
      });
      break;
    case BatchAction.Cancel:
      await handle.signal(cancelSignal, options.reason ?? 'cancelled from the command line');
      break;
  }
  try {
    return await queryProgress(handle, batchId);
  } catch (err) {
    if (!(err instanceof BatchNoAnswerError)) throw err;
    // The signal is in the batch's history already: it takes effect as soon as a worker runs the batch.
    throw new Error(`${action} was sent and applies once a worker runs the batch, but ${err.message}`);
  }
}

export interface BatchListing {
  batchId: string;
  status: string;
  startTime: string;
  closeTime?: string;
}

/** `imagebatch ls`: batches with their states, newest first. */
export async function listBatches(client: Client, limit = 50): Promise<BatchListing[]> {
  const out: BatchListing[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowType = 'batchWorkflow'` })) {
    const batchId = wf.workflowId.replace(/^batch\//, '');
    if (out.some((b) => b.batchId === batchId)) continue; // older runs of a continued batch
    out.push({
      batchId,
      status: wf.status.name.toLowerCase(),
      startTime: wf.startTime.toISOString(),
      ...(wf.closeTime ? { closeTime: wf.closeTime.toISOString() } : {}),
    });
    if (out.length >= limit) break;
  }
  return out;
}
