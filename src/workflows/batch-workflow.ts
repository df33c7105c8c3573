import {
  CancellationScope,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { batchWorkflowId, type BatchProgress, type BatchRowInput } from '../model';
import type { BatchWorkflowInput } from './batch-input';
import { BatchRows } from './batch-rows';
import { BatchRun } from './batch-run';
import {
  cancelSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  rowBlockedSignal,
  rowDoneSignal,
  rowNewKeySignal,
  rowWaitingSignal,
} from './definitions';
import { workflowNow } from './time';
import { BATCH_ACTIVITY_START_TO_CLOSE, HEARTBEAT_TIMEOUT } from './timeouts';

export type { BatchWorkflowInput } from './batch-input';

/** Rows read from the file per page, when the input gives no `pageSize`. */
const PAGE_SIZE_DEFAULT = 100;
/** History length at which a run continues as new, when the input gives no `maxHistoryEvents`. */
const MAX_HISTORY_EVENTS_DEFAULT = 10_000;

// Every one of them heartbeats while it works, so a dead worker is noticed within the heartbeat timeout.
const { readBatchPage, fetchModels, lookupRow } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});
// The catalog's prices are asked a few times only: a catalog that cannot be read leaves prices unknown, not the
// batch stuck (its body shape is not part of the interface).
const { fetchModels: fetchCatalog } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 4 },
});
// A proof that cannot be read or written costs a canary row, never the batch.
const { checkServiceProof, recordServiceProof } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 4 },
});

/**
 * Patch: every batch asks the catalog for prices at its start (not only a batch with a spend cap), a price nobody
 * shows is unknown (never 0), and the spend cap counts reservations of known prices only, holding a row whose price
 * is not known.
 */
export const PRICES_KNOWN_OR_UNKNOWN = 'prices-known-or-unknown';

/**
 * Patch: a price given (catalog or `--price`) is a claim. Once a creation of a model is charged more per image, rows of
 * that model reserve the higher price against the cap, and the progress says so. Asked only when a row shows it, so a
 * batch whose prices hold pays no marker.
 */
export const PRICES_SEEN_COUNT = 'prices-seen-count';

/**
 * Patch: with a spend cap, a row whose price is one the user gave (`--price`) waits while another is in flight, until
 * a record of the batch shows what the service charges for its model (issue 43). Asked only when a row would wait.
 */
export const DECLARED_PRICE_ONE_AT_A_TIME = 'declared-price-one-at-a-time';

/**
 * Patch: the stop-loss. A new batch sends one row alone (its canary) unless the worker's settings were proven on its
 * store, fans out once it ended `succeeded`, and pauses when a breaker trips (src/workflows/stop-loss.ts). Asked
 * once, at the batch's start; the state carries the answer across continue-as-new.
 */
export const STOP_LOSS = 'stop-loss';

/**
 * The window of rows in flight adapts (src/workflows/window.ts): it grows while rows end with no limit binding and
 * shrinks when one reports the service's limit; `concurrency` is its ceiling (and start) when given. Asked once, at
 * the batch's start; the state carries the window across continue-as-new. Batches started before keep a fixed window.
 */
export const ADAPTIVE_WINDOW = 'adaptive-window';

/**
 * Patch: a new batch's window follows the sawtooth rule (WindowState.rule): a limit that binds for good, as it does
 * once workers keep under the key's rate and the account's quota, no longer starves it to its floor. Asked once, at
 * the batch's start, with {@link ADAPTIVE_WINDOW}; the state carries the rule.
 */
export const WINDOW_SAWTOOTH = 'window-sawtooth';

/**
 * Patch: a row's workflow id fits 255 characters whatever the batch and row ids (promptWorkflowId shortens the
 * longer ones; a SQL store refuses them). Before it, `<batch>/<row>` whole. Ids of 255 or fewer are the same on
 * both paths.
 */
export const ROW_WORKFLOW_IDS_FIT_255 = 'row-workflow-ids-fit-255';

/**
 * A batch: reads the file page by page and keeps at most `concurrency` rows in flight, each its own
 * `promptWorkflow`.
 *
 * One channel: every row signals its complete record to the batch's workflow id when it ends, whatever ended it
 * (the child signals its parent, as in Temporal's batch-sliding-window sample). Rows are started with
 * `ParentClosePolicy.ABANDON`, so the batch can continue as new at any page boundary without draining its window;
 * the signal reaches whichever run is current. The state a run carries to the next is bounded by the window, so a
 * batch of a million rows keeps every history small.
 *
 * The safety net, in one place (`BatchRows.settleSilentRow`): a row that closes without reporting (terminated by hand)
 * would hold its place in the window, and the batch's end, forever. The batch watches the rows it started close
 * (events its history has anyway), and asks every ROW_CHECK_EVERY_MS after the rows it cannot watch (started by an
 * earlier run, or adopted), while it waits on them; either way the row's record is read back, never guessed.
 *
 * A batch-level stop (authentication, balance, monthly budget) pauses the batch instead of failing rows: the rows
 * that met it wait, nothing is charged for the pause, and `resumeSignal` carries on. A cancel, by signal or by
 * Temporal (a person, or a schedule's overlap policy), cancels every row in flight, blocked ones included, at any
 * time, and the batch ends when each has reported its record.
 */
export async function batchWorkflow(input: BatchWorkflowInput): Promise<BatchProgress> {
  const selfId = workflowInfo().workflowId;
  const pricesKnownOrUnknown = patched(PRICES_KNOWN_OR_UNKNOWN);
  const shortRowIds = patched(ROW_WORKFLOW_IDS_FIT_255);
  const run = new BatchRun(input, workflowNow, pricesKnownOrUnknown);
  run.askPriceCheck = () => patched(DECLARED_PRICE_ONE_AT_A_TIME);
  const rows = new BatchRows(input, run, selfId, shortRowIds, lookupRow);

  setHandler(progressQuery, () => run.progress());
  setHandler(rowDoneSignal, (record, report) => run.rowDone(record, report, () => patched(PRICES_SEEN_COUNT)));
  setHandler(rowWaitingSignal, () => undefined);
  setHandler(rowNewKeySignal, () => run.rowNewKey());
  setHandler(rowBlockedSignal, (rowId, details) => run.rowBlocked(rowId, details));
  setHandler(pauseSignal, (reason) => run.pause(reason));
  setHandler(resumeSignal, (options) => run.resume(options));
  setHandler(cancelSignal, () => run.cancel());
  // A cancel through Temporal is the cancel signal: the batch's own code runs on, not cancellable, to end every
  // row with its record before it closes.
  CancellationScope.current().cancelRequested.catch(() => run.cancel());

  return CancellationScope.nonCancellable(() => runBatch({ input, run, rows }));
}

/** One run of a batch: its run's state and decisions, and the commands to its rows. */
interface Batch {
  input: BatchWorkflowInput;
  run: BatchRun;
  rows: BatchRows;
}

/** The loop of a run: starts rows, waiting whenever the window is full or the batch is held; then the rows end. */
async function runBatch(b: Batch): Promise<BatchProgress> {
  const { input, run, rows } = b;
  const { state } = run;
  if (state.runs === 0 && Object.keys(state.prices).length === 0) {
    if (run.prices.knownOrUnknown) {
      const catalog = await fetchCatalog().catch(() => []);
      for (const m of catalog) if (m.priceUsd !== undefined) state.prices[m.id] = m.priceUsd;
    } else if (input.spendCapUsd !== undefined) {
      for (const m of await fetchModels()) if (m.priceUsd !== undefined) state.prices[m.id] = m.priceUsd;
    }
  }
  if (state.runs === 0 && patched(STOP_LOSS)) {
    const canary = run.wantsCanary();
    const proven = canary ? (await checkServiceProof().catch(() => undefined))?.proven === true : false;
    run.startStopLoss(proven);
  }
  if (state.runs === 0 && patched(ADAPTIVE_WINDOW)) run.startWindow(patched(WINDOW_SAWTOOTH));
  state.runs += 1;

  // The main loop: starts rows, waiting whenever the window is full or the batch is held.
  for (;;) {
    await rows.applyResume();
    await recordProof(b);
    if (rows.rowCheckDue) await rows.checkUnwatchedRows();
    if (state.cancelling || run.deadlinePassed()) break;

    const held = run.blockedReason();
    const capHold = !held && state.pending[0] ? run.prices.spendCapHold(state.pending[0]) : undefined;
    if (held || capHold) {
      run.waiting = held ?? capHold;
      if (capHold && !state.pausedBy) state.pausedBy = run.prices.capHoldText(capHold);
      rows.armRowCheck();
      await waitUntil(run, () => run.resumeRequested || state.cancelling || rows.rowCheckDue);
      continue;
    }

    if (state.pending.length === 0) {
      if (state.fileDone) break;
      if (shouldContinueAsNew(input)) return continueAsNewWith(b);
      run.waiting = { kind: 'reading' };
      state.pending = await readNextPage(b);
      continue;
    }

    if (run.windowFull()) {
      run.waiting = run.canaryHold() ?? run.priceHold() ?? { kind: 'window_full', concurrency: run.windowSize() };
      rows.armRowCheck();
      await waitUntil(
        run,
        () =>
          !run.windowFull() ||
          run.resumeRequested ||
          state.cancelling ||
          run.blockedReason() !== undefined ||
          rows.rowCheckDue,
      );
      continue;
    }

    run.waiting = undefined;
    // Every row the window has room for starts at once: their start commands go out in one workflow task.
    const starts: Promise<void>[] = [];
    for (;;) {
      const next = state.pending[0];
      if (!next || run.windowFull() || run.blockedReason() || run.prices.spendCapHold(next) || run.deadlinePassed())
        break;
      starts.push(rows.startRow(state.pending.shift()!));
    }
    await Promise.all(starts);
  }

  if (state.cancelling || run.deadlinePassed()) {
    // Every row that will not start is counted, those not read yet included, so the counts add up to the file.
    state.counts.not_run += state.pending.length;
    state.pending = [];
    while (!state.fileDone) {
      if (shouldContinueAsNew(input)) return continueAsNewWith(b);
      state.counts.not_run += (await readNextPage(b)).length;
    }
  }
  run.waiting = undefined;
  // The rows in flight end: each reports its record. A cancel may still come, and reaches them all, blocked or not.
  while (Object.keys(state.inFlight).length > 0) {
    if (state.cancelling) await rows.cancelRowsInFlight();
    await rows.applyResume();
    if (rows.rowCheckDue) await rows.checkUnwatchedRows();
    rows.armRowCheck();
    await condition(
      () =>
        Object.keys(state.inFlight).length === 0 || run.resumeRequested || rows.rowCheckDue || run.rowsLeftToCancel(),
    );
  }
  return run.result();
}

/** Records, once, that the canary proved the worker's settings (a failure costs the next batch a canary). */
async function recordProof({ input, run }: Batch): Promise<void> {
  const proof = run.takeProof();
  if (proof) await recordServiceProof({ batchId: input.batchId, ...proof }).catch(() => undefined);
}

function shouldContinueAsNew(input: BatchWorkflowInput): boolean {
  const maxHistory = input.maxHistoryEvents ?? MAX_HISTORY_EVENTS_DEFAULT;
  return workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistory;
}

async function readNextPage({ input, run }: Batch): Promise<BatchRowInput[]> {
  const { state } = run;
  const page = await readBatchPage({
    file: input.file,
    maxRows: Math.max(1, input.pageSize ?? PAGE_SIZE_DEFAULT),
    ...(state.cursor ? { cursor: state.cursor } : {}),
    ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    ...(input.userColumns ? { userColumns: input.userColumns } : {}),
  });
  state.cursor = page.nextCursor;
  state.fileDone = page.done;
  state.rowsRead += page.rows.length;
  state.invalidRows += page.invalidRows;
  return page.rows;
}

/** Waits for `fn`, or for the deadline if there is one. */
async function waitUntil(run: BatchRun, fn: () => boolean): Promise<void> {
  const timeoutMs = run.untilDeadlineMs();
  if (timeoutMs === undefined) return condition(fn);
  await condition(fn, timeoutMs);
}

function continueAsNewWith({ input, run }: Batch): Promise<never> {
  return continueAsNew<typeof batchWorkflow>({ ...input, state: run.state });
}

export { batchWorkflowId };
