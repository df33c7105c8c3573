import {
  CancellationScope,
  CancelledFailure,
  ParentClosePolicy,
  isCancellation,
  patched,
  proxyActivities,
  startChild,
} from '@temporalio/workflow';
import type { Activities, RunWatch } from '../activities';
import { batchWorkflowId, ScheduledRunOutcome, type BatchProgress } from '../model';
import { batchWorkflow } from './batch-workflow';
import { cancelSignal } from './definitions';
import type { ScheduledBatchResult, ScheduledBatchWorkflowInput } from './scheduled-batch-types';
import { workflowNow } from './time';
import { HEARTBEAT_TIMEOUT } from './timeouts';

/**
 * Patch: every scheduled run ends and says how. A run whose file is missing, unreadable or invalid fails at once
 * (the file is checked as `imagebatch run` checks it); a run whose batch is held by something only a person lifts
 * (its spend cap, a pause, a stop of the service, a stop-loss breaker) ends its batch and ends `paused` or
 * `stopped`, rather than holding the schedule's later ticks; and every run, however it ended, writes its result
 * files and its line in the schedule's runs.jsonl.
 */
export const SCHEDULED_RUN_ENDS = 'scheduled-run-ends';

/**
 * Patch: a schedule's budget (per day, per month) is kept. The run is told what is left of it when it is prepared:
 * with nothing left it ends `paused` before its batch starts; otherwise what is left is its batch's spend cap (or
 * the run's own cap, when that is less).
 */
export const SCHEDULED_RUN_BUDGET = 'scheduled-run-budget';

/**
 * One attempt of the watch lasts at most this long (a batch may run for days); it is then started again. Its
 * heartbeats show a dead worker within the heartbeat timeout.
 */
const RUN_WATCH_START_TO_CLOSE = '1 day';

// Both heartbeat while they work. A file that cannot start the run fails without a retry (the activity says so).
const { prepareScheduledRun, recordScheduledRun } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes', maximumAttempts: 10 },
});
const { watchScheduledBatch } = proxyActivities<Activities>({
  startToCloseTimeout: RUN_WATCH_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute' },
});

/**
 * A scheduled run behind patch {@link SCHEDULED_RUN_ENDS}: prepares its input, runs it as a batch, and ends when the
 * batch ends or is held for good (the watch, an activity, asks the batch's progress: workflows cannot query), then
 * writes its results. A run that fails or is cancelled writes them too, then ends as it would have.
 */
export async function scheduledRunThatEnds(
  input: ScheduledBatchWorkflowInput,
  batchId: string,
): Promise<ScheduledBatchResult> {
  const startedAtMs = workflowNow();
  const { scheduleId: _scheduleId, source, outDir, skipSucceeded, budget: _budget, ...batchOptions } = input;
  const budget = input.budget !== undefined && patched(SCHEDULED_RUN_BUDGET) ? input.budget : undefined;
  const model = input.defaultModel ? { defaultModel: input.defaultModel } : {};
  type Ending = Omit<Parameters<typeof recordScheduledRun>[0], 'outDir' | 'runId' | 'startedAtMs' | 'endedAtMs'>;
  // Written whatever ended the run, a cancel included.
  const record = (ending: Ending) =>
    CancellationScope.nonCancellable(() =>
      recordScheduledRun({ outDir, runId: batchId, startedAtMs, endedAtMs: workflowNow(), ...model, ...ending }),
    );

  let prepared;
  try {
    prepared = await prepareScheduledRun({
      source,
      outDir,
      batchId,
      skipSucceeded: skipSucceeded ?? false,
      ...model,
      check: { ...model, ...(input.userColumns ? { userColumns: input.userColumns } : {}) },
      ...(budget ? { budget } : {}),
    });
  } catch (err) {
    await record({ outcome: outcomeOfError(err), reason: reasonOf(err), rows: 0, skipped: 0 });
    throw err;
  }
  const { file, rows, skipped } = prepared;
  if (prepared.budget && 'reason' in prepared.budget) {
    // Nothing left of the schedule's budget: the run ends before its batch starts (its rows `not_run`).
    const { reason } = prepared.budget;
    await record({ outcome: ScheduledRunOutcome.Paused, reason, file, rows, skipped });
    return { batchId, rows, skipped, outcome: ScheduledRunOutcome.Paused, reason };
  }
  const cap = capWithin(input.spendCapUsd, prepared.budget?.leftUsd);
  const runDir = `${outDir}/${batchId}`;
  const child = await startChild(batchWorkflow, {
    workflowId: batchWorkflowId(batchId),
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    memo: { batchId, file, outDir: runDir, defaultModel: input.defaultModel ?? '' },
    args: [
      { ...batchOptions, ...(cap.usd === undefined ? {} : { spendCapUsd: cap.usd }), batchId, file, outDir: runDir },
    ],
  });

  const watch = new CancellationScope();
  const watching = watch.run(() => watchScheduledBatch({ batchId }));
  let held: Extract<RunWatch, { hold: unknown }> | undefined;
  let progress: BatchProgress;
  try {
    const first = await Promise.race([
      child.result().then((p) => ({ progress: p })),
      // A watch cancelled (the run's end, or the run's cancel) or failed never ends the run: its batch does.
      watching.then(
        (w) => ({ watch: w }),
        () => new Promise<never>(() => undefined),
      ),
    ]);
    if ('watch' in first && 'hold' in first.watch) {
      held = first.watch;
      // The batch ends its rows in flight (each with its record) and counts the rest `not_run`.
      await child.signal(cancelSignal, `the scheduled run ended: ${held.reason}`);
    }
    progress = 'progress' in first ? first.progress : await child.result();
  } catch (err) {
    watch.cancel();
    await record({ outcome: outcomeOfError(err), reason: reasonOf(err), file, rows, skipped });
    throw err;
  }
  watch.cancel();
  const outcome =
    held?.hold ?? (progress.status === 'cancelled' ? ScheduledRunOutcome.Cancelled : ScheduledRunOutcome.Completed);
  const reason =
    held?.byCap && cap.fromBudget ? `${held.reason} (what was left of the schedule's budget)` : held?.reason;
  await record({ outcome, ...(reason ? { reason } : {}), file, rows, skipped, progress });
  // A run cancelled through Temporal (a person, `cancel_other`) ends cancelled, as Temporal and `ls` show it.
  if (CancellationScope.current().consideredCancelled) throw new CancelledFailure('the scheduled run was cancelled');
  return { batchId, rows, skipped, progress, outcome, ...(reason ? { reason } : {}) };
}

/** The batch's spend cap: the run's own, or what is left of the schedule's budget when that is less. */
function capWithin(runCapUsd: number | undefined, budgetLeftUsd: number | undefined) {
  if (budgetLeftUsd === undefined || (runCapUsd !== undefined && runCapUsd <= budgetLeftUsd)) {
    return { usd: runCapUsd, fromBudget: false };
  }
  return { usd: budgetLeftUsd, fromBudget: true };
}

function outcomeOfError(err: unknown): ScheduledRunOutcome {
  return isCancellation(err) ? ScheduledRunOutcome.Cancelled : ScheduledRunOutcome.Failed;
}

/** The failure's own words: an activity's or a child's failure says them in its cause. */
function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error ? err.cause.message : err.message;
}
