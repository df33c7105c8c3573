import { ParentClosePolicy, executeChild, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { batchWorkflow } from './batch-workflow';
import { batchWorkflowId } from '../model';
import type { ScheduledBatchResult, ScheduledBatchWorkflowInput } from './scheduled-batch-types';
import { SCHEDULED_RUN_ENDS, scheduledRunThatEnds } from './scheduled-run';
import { HEARTBEAT_TIMEOUT } from './timeouts';

export type { ScheduledBatchResult, ScheduledBatchWorkflowInput } from './scheduled-batch-types';

// Both heartbeat while they work (a source download, every row's result), so a dead worker shows within seconds.
const { prepareScheduledRun, recordSucceededRows } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes', maximumAttempts: 10 },
});

/**
 * One run of a schedule (a Temporal Schedule starts it on its cron or interval).
 *
 * Why a workflow of its own rather than the schedule starting `batchWorkflow` directly: every run needs a fresh
 * batch id, its own frozen copy of the input (the source may be a URL, or a file that grows), and, when asked,
 * only the rows that never succeeded before — which means reading what earlier runs did. Each run is an
 * ordinary batch, so pause, resume, cancel, results and the gallery work on it as on any other.
 */
export async function scheduledBatchWorkflow(input: ScheduledBatchWorkflowInput): Promise<ScheduledBatchResult> {
  // The schedule names each run `<workflow id>-<scheduled time>`, unique per run and stable on replay.
  const batchId = workflowInfo()
    .workflowId.replace(/^schedule\//, '')
    .replace(/[^A-Za-z0-9._:-]/g, '-')
    .slice(-128);
  // Every run ends and says how, and writes its results (src/workflows/scheduled-run.ts).
  if (patched(SCHEDULED_RUN_ENDS)) return scheduledRunThatEnds(input, batchId);
  const { scheduleId: _scheduleId, source, outDir, skipSucceeded, ...batchOptions } = input;
  const prepared = await prepareScheduledRun({
    source,
    outDir,
    batchId,
    skipSucceeded: skipSucceeded ?? false,
    ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
  });
  const progress = await executeChild(batchWorkflow, {
    workflowId: batchWorkflowId(batchId),
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    memo: { batchId, file: prepared.file, outDir: `${outDir}/${batchId}`, defaultModel: input.defaultModel ?? '' },
    args: [{ ...batchOptions, batchId, file: prepared.file, outDir: `${outDir}/${batchId}` }],
  });
  if (skipSucceeded) await recordSucceededRows({ outDir, batchId, file: prepared.file });
  return { batchId, rows: prepared.rows, skipped: prepared.skipped, progress };
}
