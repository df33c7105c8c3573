import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import {
  CancelledFailure,
  ChildWorkflowFailure,
  ParentClosePolicy,
  TerminatedFailure,
  condition,
  continueAsNew,
  patched,
  getExternalWorkflowHandle,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { BatchRowInput } from '../activities/types';
import { applyRowDone, newBatchState, progressOf, reservedUsd, type BatchState } from './batch-state';
import {
  cancelSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  rowBlockedSignal,
  rowDoneSignal,
  rowResumeSignal,
} from './definitions';
import { batchWorkflowId, promptWorkflowId } from './keys';
import { RowState, type BatchProgress, type RowSummary, type WaitReason } from './model';
import { promptWorkflow } from './prompt-workflow';
import { workflowNow } from './time';
import { BATCH_ACTIVITY_START_TO_CLOSE, HEARTBEAT_TIMEOUT, ROW_CHECK_EVERY_MS } from './timeouts';

export interface BatchWorkflowInput {
  batchId: string;
  /** Path of the batch file, as the workers see it. */
  file: string;
  /** Output folder for images (as the workers see it). */
  outDir: string;
  /** Model of rows that name none. */
  defaultModel?: string;
  /**
   * Rows in flight at most (the sliding window).
   * @default 8
   */
  concurrency?: number;
  /**
   * Attempts per row at most.
   * @default 3
   */
  maxAttempts?: number;
  /**
   * Rows per page read from the file.
   * @default 100
   */
  pageSize?: number;
  /**
   * Net spend (charges less refunds, plus what rows in flight may cost) the batch may reach; it pauses when the
   * next row would pass it.
   * @default no cap
   */
  spendCapUsd?: number;
  /**
   * ISO time after which no row starts; rows not started end as `not_run`.
   * @default no deadline
   */
  deadline?: string;
  /**
   * Longest total wait for one creation to end (polls and the waits between them); a row whose creation has not
   * ended by then fails with a message that says so (`imagebatch run --max-poll-wait`).
   * @default the row's default (30 minutes)
   */
  maxPollWaitMs?: number;
  /**
   * History length at which a run continues as new, besides the server's own suggestion.
   * @default 10_000
   */
  maxHistoryEvents?: number;
  /**
   * How often the batch asks after rows in flight whose close it cannot see (rows started by an earlier run),
   * while it waits on them: one that was terminated by hand is then counted instead of waited for forever.
   * @default ROW_CHECK_EVERY_MS (5 minutes)
   */
  rowCheckEveryMs?: number;
  /** @internal State carried across continue-as-new. */
  state?: BatchState;
}

/** Patch id: rows that fit the window start together (see the main loop). */
export const PARALLEL_ROW_STARTS = 'parallel-row-starts';
/**
 * Patch id: a row that closes without reporting (terminated by hand, timed out) is counted instead of being
 * waited for forever: the batch sees its own children close, and asks after the rows of earlier runs.
 */
export const ROWS_CLOSED_UNREPORTED = 'rows-closed-unreported';

// Every one of them heartbeats while it works, so a dead worker is noticed within the heartbeat timeout.
const { readBatchPage, fetchModels, lookupRow } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * A batch: reads the file page by page and keeps at most `concurrency` rows in flight, each its own
 * {@link promptWorkflow}.
 *
 * Why rows report by signal instead of the batch awaiting child results: rows are started with
 * `ParentClosePolicy.ABANDON` and signal the batch's workflow id when they end, so the batch can continue as new
 * at any page boundary without draining its window; the signal reaches whichever run is current. The state a
 * run carries to the next is bounded by the window, so a batch of a million rows keeps every history small.
 *
 * A batch-level stop (authentication, balance, monthly budget) pauses the batch instead of failing rows: the
 * rows that met it wait, nothing is charged for the pause, and `resumeSignal` carries on.
 *
 * A row that never reports (terminated by hand) would hold its place in the window, and the batch's end,
 * forever. The batch therefore watches its own children close (events its history has anyway), and asks every
 * ROW_CHECK_EVERY_MS after the rows it cannot watch (started by an earlier run), while it waits on them.
 */
export async function batchWorkflow(input: BatchWorkflowInput): Promise<BatchProgress> {
  const concurrency = Math.max(1, input.concurrency ?? 8);
  const pageSize = Math.max(1, input.pageSize ?? 100);
  const maxHistory = input.maxHistoryEvents ?? 10_000;
  const deadlineMs = input.deadline ? Date.parse(input.deadline) : undefined;
  const state = input.state ?? newBatchState(workflowNow());
  const selfId = workflowInfo().workflowId;
  let waiting: WaitReason | undefined;
  let resumeRequested = false;
  /** Rows whose close this run cannot see: carried from an earlier run, or found running when started again. */
  const unwatched = new Set(Object.keys(state.inFlight));
  let rowCheckDue = false;
  let rowCheckArmed = false;

  setHandler(progressQuery, () => progressOf(input.batchId, state, workflowNow(), waiting, false));
  setHandler(rowDoneSignal, (summary: RowSummary) => {
    applyRowDone(state, summary);
  });
  setHandler(rowBlockedSignal, (rowId, details) => {
    state.stop = details;
    if (!state.blocked.includes(rowId)) state.blocked.push(rowId);
  });
  setHandler(pauseSignal, (reason) => {
    state.pausedBy = reason ?? 'paused by request';
  });
  setHandler(resumeSignal, (options) => {
    if (options?.spendCapUsd !== undefined) input.spendCapUsd = options.spendCapUsd;
    resumeRequested = true;
  });
  setHandler(cancelSignal, () => {
    state.cancelling = true;
  });

  if (state.runs === 0 && Object.keys(state.prices).length === 0 && input.spendCapUsd !== undefined) {
    for (const m of await fetchModels()) if (m.priceUsd !== undefined) state.prices[m.id] = m.priceUsd;
  }
  state.runs += 1;

  const deadlinePassed = () => deadlineMs !== undefined && workflowNow() >= deadlineMs;
  const windowFull = () => Object.keys(state.inFlight).length >= concurrency;
  const blockedReason = (): WaitReason | undefined =>
    state.stop
      ? { kind: 'batch_stop', details: state.stop }
      : state.pausedBy
        ? { kind: 'paused', reason: state.pausedBy }
        : undefined;

  /** Handles a resume request: clears the pause and the stop, and lets the rows that waited carry on. */
  async function applyResume(): Promise<void> {
    if (!resumeRequested) return;
    resumeRequested = false;
    delete state.pausedBy;
    delete state.stop;
    const blocked = state.blocked;
    state.blocked = [];
    for (const rowId of blocked) {
      await getExternalWorkflowHandle(promptWorkflowId(input.batchId, rowId))
        .signal(rowResumeSignal)
        .catch(() => undefined);
    }
  }

  function priceOf(row: BatchRowInput): number {
    return (state.prices[row.request.model] ?? 0) * (row.request.num_images ?? 1);
  }

  async function startRow(row: BatchRowInput): Promise<void> {
    const workflowId = promptWorkflowId(input.batchId, row.rowId);
    state.inFlight[row.rowId] = priceOf(row);
    state.started += 1;
    try {
      const child = await startChild(promptWorkflow, {
        workflowId,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // A row that has ended is never run again under the same batch id: a re-run resumes, it does not repay.
        // Only a row whose workflow failed, was cancelled or was terminated may start again.
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        memo: { batchId: input.batchId, rowId: row.rowId },
        args: [
          {
            batchId: input.batchId,
            rowId: row.rowId,
            line: row.line,
            request: row.request,
            outDir: input.outDir,
            parentWorkflowId: selfId,
            ...(input.maxAttempts === undefined ? {} : { maxAttempts: input.maxAttempts }),
            ...(input.maxPollWaitMs === undefined ? {} : { maxPollWaitMs: input.maxPollWaitMs }),
          },
        ],
      });
      // A row reports before it closes; one that closes without a report was terminated (or timed out).
      void child.result().then(
        () => undefined,
        (err: unknown) => closedUnreported(row.rowId, closedStateOf(err)),
      );
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // The batch was started again over rows that exist already: a running row will report to us; a closed
      // one is counted from its own result.
      const found = await lookupRow({ workflowId });
      if (found.status === 'running') unwatched.add(row.rowId);
      if (found.status === 'closed') {
        applyRowDone(state, {
          rowId: row.rowId,
          state: (found.summary?.state as RowState | undefined) ?? RowState.Failed,
          chargedUsd: found.summary?.chargedUsd ?? 0,
          refundedUsd: found.summary?.refundedUsd ?? 0,
          attempts: found.summary?.attempts ?? 0,
        });
      }
    }
  }

  const shouldContinueAsNew = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistory;

  // The main loop: one row at a time, waiting whenever the window is full or the batch is held.
  for (;;) {
    await applyResume();
    if (rowCheckDue) await checkUnwatchedRows();
    if (state.cancelling || deadlinePassed()) break;

    const held = blockedReason();
    const capHold = !held && state.pending[0] ? spendCapHold(state.pending[0]) : undefined;
    if (held || capHold) {
      waiting = held ?? capHold;
      if (capHold && !state.pausedBy) state.pausedBy = `spend cap of ${input.spendCapUsd} USD reached`;
      await waitUntil(() => resumeRequested || state.cancelling);
      continue;
    }

    if (state.pending.length === 0) {
      if (state.fileDone) break;
      if (shouldContinueAsNew()) return continueAsNewWith();
      waiting = { kind: 'reading' };
      state.pending = await readNextPage();
      continue;
    }

    if (windowFull()) {
      waiting = { kind: 'window_full', concurrency };
      armRowCheck();
      await waitUntil(
        () => !windowFull() || resumeRequested || state.cancelling || blockedReason() !== undefined || rowCheckDue,
      );
      continue;
    }

    waiting = undefined;
    if (!patched(PARALLEL_ROW_STARTS)) {
      // Histories recorded before the patch started one row per workflow task.
      await startRow(state.pending.shift()!);
      continue;
    }
    // Start every row the window has room for at once: their start commands go out in one workflow task,
    // instead of one round trip to the server per row (about 3 rows/s on the dev server's SQLite before).
    const starts: Promise<void>[] = [];
    for (;;) {
      const next = state.pending[0];
      if (!next || windowFull() || blockedReason() || spendCapHold(next) || deadlinePassed()) break;
      starts.push(startRow(state.pending.shift()!));
    }
    await Promise.all(starts);
  }

  // No more rows will start: cancel what is in flight if asked, and count what never started.
  if (state.cancelling) {
    for (const rowId of Object.keys(state.inFlight)) {
      await getExternalWorkflowHandle(promptWorkflowId(input.batchId, rowId))
        .cancel()
        .catch(() => undefined);
    }
  }
  if (state.cancelling || deadlinePassed()) {
    // Every row that will not start is counted, those not read yet included, so the counts add up to the file.
    state.counts.not_run += state.pending.length;
    state.pending = [];
    while (!state.fileDone) {
      if (shouldContinueAsNew()) return continueAsNewWith();
      state.counts.not_run += (await readNextPage()).length;
    }
  }
  waiting = undefined;
  while (Object.keys(state.inFlight).length > 0) {
    // Rows still blocked by a batch-level stop wait for a resume even now that the file is read.
    await applyResume();
    if (rowCheckDue) await checkUnwatchedRows();
    armRowCheck();
    await condition(() => Object.keys(state.inFlight).length === 0 || resumeRequested || rowCheckDue);
  }
  return progressOf(input.batchId, state, workflowNow(), undefined, true);

  async function readNextPage(): Promise<BatchRowInput[]> {
    const page = await readBatchPage({
      file: input.file,
      maxRows: pageSize,
      ...(state.cursor ? { cursor: state.cursor } : {}),
      ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    });
    state.cursor = page.nextCursor;
    state.fileDone = page.done;
    state.rowsRead += page.rows.length;
    state.invalidRows += page.invalidRows;
    return page.rows;
  }

  /** Waits for `fn`, or for the deadline if there is one. */
  async function waitUntil(fn: () => boolean): Promise<void> {
    if (deadlineMs === undefined) return condition(fn);
    await condition(fn, Math.max(1, deadlineMs - workflowNow()));
  }

  function spendCapHold(next: BatchRowInput): WaitReason | undefined {
    if (input.spendCapUsd === undefined) return undefined;
    const projected = state.spentUsd + reservedUsd(state) + priceOf(next);
    if (projected <= input.spendCapUsd + 1e-9) return undefined;
    return { kind: 'spend_cap', capUsd: input.spendCapUsd, spentUsd: state.spentUsd };
  }

  /** A row closed without reporting: counted as it closed (behind the patch; earlier code waited for it). */
  function closedUnreported(rowId: string, rowState: RowState, summary?: Partial<RowSummary>): void {
    if (!(rowId in state.inFlight) || !patched(ROWS_CLOSED_UNREPORTED)) return;
    applyRowDone(state, { rowId, state: rowState, chargedUsd: 0, refundedUsd: 0, attempts: 0, ...summary });
  }

  function unwatchedInFlight(): string[] {
    return [...unwatched].filter((rowId) => rowId in state.inFlight);
  }

  /** Starts the timer of the next look-up of the unwatched rows in flight, if there are any (one timer at a time). */
  function armRowCheck(): void {
    if (rowCheckArmed || unwatchedInFlight().length === 0 || !patched(ROWS_CLOSED_UNREPORTED)) return;
    rowCheckArmed = true;
    void sleep(input.rowCheckEveryMs ?? ROW_CHECK_EVERY_MS).then(
      () => {
        rowCheckArmed = false;
        rowCheckDue = true;
      },
      () => undefined,
    );
  }

  /** Asks after every unwatched row in flight; those that closed are counted as they ended. */
  async function checkUnwatchedRows(): Promise<void> {
    rowCheckDue = false;
    const rowIds = unwatchedInFlight();
    const found = await Promise.all(
      rowIds.map((rowId) => lookupRow({ workflowId: promptWorkflowId(input.batchId, rowId) })),
    );
    found.forEach((f, i) => {
      const rowId = rowIds[i]!;
      if (f.status === 'running') return;
      unwatched.delete(rowId);
      if (f.summary) {
        const { chargedUsd, refundedUsd, attempts } = f.summary;
        closedUnreported(rowId, f.summary.state as RowState, { chargedUsd, refundedUsd, attempts });
      } else {
        closedUnreported(
          rowId,
          f.closedAs === 'TERMINATED' || f.closedAs === 'CANCELED' ? RowState.Cancelled : RowState.Failed,
        );
      }
    });
  }

  function continueAsNewWith(): Promise<never> {
    return continueAsNew<typeof batchWorkflow>({ ...input, state });
  }
}

/** How a row that closed without reporting is counted: terminated or cancelled rows as cancelled, others failed. */
function closedStateOf(err: unknown): RowState {
  const cause = err instanceof ChildWorkflowFailure ? err.cause : err;
  return cause instanceof TerminatedFailure || cause instanceof CancelledFailure ? RowState.Cancelled : RowState.Failed;
}

export { batchWorkflowId };
