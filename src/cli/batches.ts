import path from 'node:path';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { validateBatchFile, type BatchReport } from '../batch';
import { batchWorkflow, progressQuery, type BatchProgress, type BatchWorkflowInput } from '../workflows';
import { ID_PATTERN, batchWorkflowId } from '../workflows/keys';

/** The batch file has problems: nothing was started (the report lists every one, with its line). */
export class BatchValidationError extends Error {
  readonly code = 'BATCH_INVALID';
  constructor(readonly report: BatchReport) {
    super(`${report.problemCount} problem(s) in the batch file; nothing was started`);
    this.name = 'BatchValidationError';
  }
}

/** Options of {@link startOrAttachBatch}. */
export interface StartBatchOptions extends Omit<BatchWorkflowInput, 'state' | 'file' | 'outDir'> {
  client: Client;
  taskQueue: string;
  /** The batch file, as the workers see it (made absolute). */
  file: string;
  /** Output folder, as the workers see it (made absolute). */
  outDir: string;
}

export interface StartedBatch {
  handle: WorkflowHandle<typeof batchWorkflow>;
  /** True when a batch with this id was already running and we attached to it. */
  attached: boolean;
  report: BatchReport;
}

/**
 * Validates the whole file first (nothing starts if any row is wrong), then starts the batch, or attaches to
 * the running batch of the same id. A batch id whose batch has ended starts again: every row that exists is
 * counted from its own result, nothing is submitted twice.
 */
export async function startOrAttachBatch(options: StartBatchOptions): Promise<StartedBatch> {
  const { client, taskQueue, ...rest } = options;
  if (!ID_PATTERN.test(rest.batchId)) {
    throw new Error(`batch id ${JSON.stringify(rest.batchId)} must be 1 to 128 characters of A-Z a-z 0-9 . _ : -`);
  }
  const input: BatchWorkflowInput = { ...rest, file: path.resolve(rest.file), outDir: path.resolve(rest.outDir) };
  const report = await validateBatchFile(input.file, input.defaultModel ? { defaultModel: input.defaultModel } : {});
  if (!report.ok) throw new BatchValidationError(report);
  const workflowId = batchWorkflowId(input.batchId);
  const attached = await isRunning(client, workflowId);
  const handle = await client.workflow.start(batchWorkflow, {
    workflowId,
    taskQueue,
    args: [input],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    memo: { batchId: input.batchId, file: input.file, outDir: input.outDir, defaultModel: input.defaultModel ?? '' },
  });
  return { handle, attached, report };
}

async function isRunning(client: Client, workflowId: string): Promise<boolean> {
  try {
    return (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch {
    return false;
  }
}

/** Follows a batch until it ends: calls `onProgress` every `intervalMs`, returns the final progress. */
export async function followBatch(
  handle: WorkflowHandle<typeof batchWorkflow>,
  onProgress: (p: BatchProgress) => void,
  options: { intervalMs?: number; signal?: AbortSignal } = {},
): Promise<BatchProgress> {
  let finished = false;
  const result = handle.result().finally(() => (finished = true));
  while (!finished) {
    if (options.signal?.aborted) throw new Error('interrupted');
    try {
      onProgress(await handle.query(progressQuery));
    } catch {
      // The run may be between two continue-as-new hops or just ending: ask again next time.
    }
    await Promise.race([result.catch(() => undefined), delay(options.intervalMs ?? 500)]);
  }
  const final = await result;
  onProgress(final);
  return final;
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
