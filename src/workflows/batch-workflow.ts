import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import {
  CancellationScope,
  ParentClosePolicy,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  batchWorkflowId,
  legacyPromptWorkflowId,
  promptWorkflowId,
  roundUsd,
  type BatchProgress,
  type BatchRowInput,
  type LedgerScope,
  type ListPrice,
  type PriceSeen,
  type RowRecord,
  type RowReport,
  type StopLossOptions,
  type UserColumns,
  type WaitReason,
} from '../model';
import {
  applyRowDone,
  chargedPerImage,
  committedUsd,
  newBatchState,
  progressOf,
  reservedUsd,
  unpricedInFlight,
  type BatchState,
  type LimitSeen,
} from './batch-state';
import {
  cancelSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  rowBlockedSignal,
  rowDoneSignal,
  rowNewKeySignal,
  rowResumeSignal,
  rowWaitingSignal,
} from './definitions';
import { promptWorkflow } from './prompt-workflow';
import { StopLoss, type PriceNote } from './stop-loss';
import { AdaptiveWindow } from './window';
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
   * Columns the user owns (`--carry`, `--column`), passed to the page reader.
   * @default none (a column that is not ours is an error)
   */
  userColumns?: UserColumns;
  /**
   * Rows in flight at most: the adaptive window's ceiling and start (see {@link ADAPTIVE_WINDOW}).
   * @default none: the window starts at 8 and grows up to 256 (WINDOW_DEFAULTS); 8 fixed in a batch started before it
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
   * Net spend the batch may reach: what ended rows spent (a row of unknown outcome counted at its price), plus the
   * price reserved for every row in flight. It pauses when the next row would pass it, and holds a row whose price
   * is not known (the CLI refuses such a batch at start).
   * @default no cap
   */
  spendCapUsd?: number;
  /**
   * Prices per image (USD) by model that the user gave (`--price`), for models whose price the catalog does not show.
   * @default none
   */
  prices?: Record<string, number>;
  /**
   * ISO time after which no row starts; rows not started end as `not_run`.
   * @default no deadline
   */
  deadline?: string;
  /**
   * Longest total wait for one creation to end (polls and the waits between them); a row whose creation has not
   * ended by then fails with a message that says so (`imagebatch run --max-poll-wait`).
   * @default the row's default, DEFAULT_MAX_POLL_WAIT_MS
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
  /**
   * The ledger store the batch was recorded in (`imagebatch run` gives its id), and whether it asks for new images;
   * each row passes it to its keys.
   * @default none: any store, and earlier requests of the same fingerprint serve rows
   */
  ledger?: LedgerScope;
  /**
   * The canary row first, and the breakers that pause the batch when something would repeat.
   * @default STOP_LOSS_DEFAULTS: a canary, and every breaker on
   */
  stopLoss?: StopLossOptions;
  /** @internal State carried across continue-as-new. */
  state?: BatchState;
}

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
 * {@link promptWorkflow}.
 *
 * One channel: every row signals its complete record to the batch's workflow id when it ends, whatever ended it
 * (the child signals its parent, as in Temporal's batch-sliding-window sample). Rows are started with
 * `ParentClosePolicy.ABANDON`, so the batch can continue as new at any page boundary without draining its window;
 * the signal reaches whichever run is current. The state a run carries to the next is bounded by the window, so a
 * batch of a million rows keeps every history small.
 *
 * The safety net, in one place ({@link settleSilentRow}): a row that closes without reporting (terminated by hand)
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
  const concurrency = Math.max(1, input.concurrency ?? 8);
  const pageSize = Math.max(1, input.pageSize ?? 100);
  const maxHistory = input.maxHistoryEvents ?? 10_000;
  const deadlineMs = input.deadline ? Date.parse(input.deadline) : undefined;
  const state = input.state ?? newBatchState(workflowNow());
  const selfId = workflowInfo().workflowId;
  const pricesKnownOrUnknown = patched(PRICES_KNOWN_OR_UNKNOWN);
  const shortRowIds = patched(ROW_WORKFLOW_IDS_FIT_255);
  const rowWorkflowId = (rowId: string) =>
    shortRowIds ? promptWorkflowId(input.batchId, rowId) : legacyPromptWorkflowId(input.batchId, rowId);
  let waiting: WaitReason | undefined;
  let resumeRequested = false;
  /** Rows whose close this run cannot see: carried from an earlier run, or found running when started again. */
  const unwatched = new Set(Object.keys(state.inFlight));
  let rowCheckDue = false;
  let rowCheckArmed = false;
  /** Rows in flight already asked to cancel (by this run). */
  const cancelSent = new Set<string>();
  /** The stop-loss, in a batch started with it (see {@link STOP_LOSS}). */
  let loss = state.stopLoss ? new StopLoss(state.stopLoss, input.stopLoss) : undefined;

  /** The limit the latest row to end said binds: for the progress only (no command depends on it). */
  let limitSeen: LimitSeen | undefined;
  // A stop that came while the last rows were in flight says why too (a query only: no command changes).
  setHandler(progressQuery, () =>
    progressOf(
      input.batchId,
      state,
      workflowNow(),
      waiting ?? blockedReason(),
      false,
      input.spendCapUsd,
      limitSeen,
      pricesSeen(),
    ),
  );
  setHandler(rowDoneSignal, (record: RowRecord, report?: RowReport) => {
    const price = loss ? priceNoteOf(record) : undefined;
    notePriceSeen(record);
    if (rowEnded(record, price) && state.window)
      new AdaptiveWindow(state.window).rowEnded(report?.limit, workflowNow(), report?.refused === true);
    if (report?.limit) limitSeen = { limit: report.limit, atMs: workflowNow() };
  });
  setHandler(rowWaitingSignal, () => undefined);
  setHandler(rowNewKeySignal, () => {
    state.newKeys = (state.newKeys ?? 0) + 1;
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
    if (options?.prices) input.prices = { ...input.prices, ...options.prices };
    resumeRequested = true;
  });
  setHandler(cancelSignal, () => {
    state.cancelling = true;
  });
  // A cancel through Temporal is the cancel signal: the batch's own code runs on, not cancellable, to end every
  // row with its record before it closes.
  CancellationScope.current().cancelRequested.catch(() => {
    state.cancelling = true;
  });

  return CancellationScope.nonCancellable(run);

  async function run(): Promise<BatchProgress> {
    if (state.runs === 0 && Object.keys(state.prices).length === 0) {
      if (pricesKnownOrUnknown) {
        const catalog = await fetchCatalog().catch(() => []);
        for (const m of catalog) if (m.priceUsd !== undefined) state.prices[m.id] = m.priceUsd;
      } else if (input.spendCapUsd !== undefined) {
        for (const m of await fetchModels()) if (m.priceUsd !== undefined) state.prices[m.id] = m.priceUsd;
      }
    }
    if (state.runs === 0 && patched(STOP_LOSS)) {
      const canary = StopLoss.canaryWanted(input.stopLoss);
      const proven = canary ? (await checkServiceProof().catch(() => undefined))?.proven === true : false;
      state.stopLoss = StopLoss.start(input.stopLoss, proven);
      loss = new StopLoss(state.stopLoss, input.stopLoss);
    }
    if (state.runs === 0 && patched(ADAPTIVE_WINDOW)) {
      const given = input.concurrency === undefined ? {} : { initial: concurrency, ceiling: concurrency };
      state.window = AdaptiveWindow.start(given, patched(WINDOW_SAWTOOTH) ? 'sawtooth' : undefined);
    }
    state.runs += 1;

    // The main loop: starts rows, waiting whenever the window is full or the batch is held.
    for (;;) {
      await applyResume();
      await recordProof();
      if (rowCheckDue) await checkUnwatchedRows();
      if (state.cancelling || deadlinePassed()) break;

      const held = blockedReason();
      const capHold = !held && state.pending[0] ? spendCapHold(state.pending[0]) : undefined;
      if (held || capHold) {
        waiting = held ?? capHold;
        if (capHold && !state.pausedBy) state.pausedBy = capHoldText(capHold);
        armRowCheck();
        await waitUntil(() => resumeRequested || state.cancelling || rowCheckDue);
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
        waiting = canaryHold() ?? { kind: 'window_full', concurrency: windowSize() };
        armRowCheck();
        await waitUntil(
          () => !windowFull() || resumeRequested || state.cancelling || blockedReason() !== undefined || rowCheckDue,
        );
        continue;
      }

      waiting = undefined;
      // Every row the window has room for starts at once: their start commands go out in one workflow task.
      const starts: Promise<void>[] = [];
      for (;;) {
        const next = state.pending[0];
        if (!next || windowFull() || blockedReason() || spendCapHold(next) || deadlinePassed()) break;
        starts.push(startRow(state.pending.shift()!));
      }
      await Promise.all(starts);
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
    // The rows in flight end: each reports its record. A cancel may still come, and reaches them all, blocked or not.
    while (Object.keys(state.inFlight).length > 0) {
      if (state.cancelling) await cancelRowsInFlight();
      await applyResume();
      if (rowCheckDue) await checkUnwatchedRows();
      armRowCheck();
      await condition(
        () =>
          Object.keys(state.inFlight).length === 0 ||
          resumeRequested ||
          rowCheckDue ||
          (state.cancelling && Object.keys(state.inFlight).some((rowId) => !cancelSent.has(rowId))),
      );
    }
    return progressOf(input.batchId, state, workflowNow(), undefined, true, input.spendCapUsd, undefined, pricesSeen());
  }

  function deadlinePassed(): boolean {
    return deadlineMs !== undefined && workflowNow() >= deadlineMs;
  }

  /** Full: the window's rows in flight, or the canary alone. */
  function windowFull(): boolean {
    return Object.keys(state.inFlight).length >= windowSize() || canaryHold() !== undefined;
  }

  /** Rows in flight allowed now: the adaptive window's, or `concurrency` in a batch started before it. */
  function windowSize(): number {
    return state.window ? new AdaptiveWindow(state.window).size : concurrency;
  }

  function canaryHold(): WaitReason | undefined {
    const held = loss?.holds();
    return held?.kind === 'canary' ? held : undefined;
  }

  function blockedReason(): WaitReason | undefined {
    if (state.stop) return { kind: 'batch_stop', details: state.stop };
    if (state.pausedBy) return { kind: 'paused', reason: state.pausedBy };
    const held = loss?.holds();
    return held?.kind === 'stop_loss' ? held : undefined;
  }

  /** A row's end, counted once, and seen by the stop-loss. */
  /** Whether the row was one of the batch's in flight (a report seen before changes nothing). */
  function rowEnded(record: RowRecord, price?: PriceNote): boolean {
    const ended = applyRowDone(state, record);
    if (ended) loss?.ended(record, price);
    return ended;
  }

  /** With a spend cap, a row's charge per image against the price the cap counted for it, when above the given. */
  function priceNoteOf(record: RowRecord): PriceNote | undefined {
    const listed = input.spendCapUsd === undefined ? undefined : modelPrice(record.model, 1);
    if (!listed) return undefined;
    const chargedUsd = chargedPerImage(record, state.inFlight[record.rowId], listed.usd);
    if (chargedUsd === undefined) return undefined;
    return { model: record.model, chargedUsd, countedUsd: Math.max(listed.usd, state.pricesSeen?.[record.model] ?? 0) };
  }

  /** Records, once, that the canary proved the worker's settings (a failure costs the next batch a canary). */
  async function recordProof(): Promise<void> {
    const proof = loss?.takeProof();
    if (proof) await recordServiceProof({ batchId: input.batchId, ...proof }).catch(() => undefined);
  }

  function shouldContinueAsNew(): boolean {
    return workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistory;
  }

  /** Handles a resume request: clears the pause and the stop, and lets the rows that waited carry on. */
  async function applyResume(): Promise<void> {
    if (!resumeRequested) return;
    resumeRequested = false;
    delete state.pausedBy;
    delete state.stop;
    loss?.resumed();
    const blocked = state.blocked;
    state.blocked = [];
    await Promise.all(blocked.map((rowId) => resumeRow(rowId)));
  }

  async function resumeRow(rowId: string): Promise<void> {
    await getExternalWorkflowHandle(rowWorkflowId(rowId))
      .signal(rowResumeSignal)
      .catch(() => undefined);
  }

  /** Asks every row in flight not asked yet to cancel; each ends `cancelled` and reports its record. */
  async function cancelRowsInFlight(): Promise<void> {
    const rowIds = Object.keys(state.inFlight).filter((rowId) => !cancelSent.has(rowId));
    for (const rowId of rowIds) cancelSent.add(rowId);
    await Promise.all(
      rowIds.map((rowId) =>
        getExternalWorkflowHandle(rowWorkflowId(rowId))
          .cancel()
          .catch(() => undefined),
      ),
    );
  }

  /** The row's price before it is sent: the catalog's for its model, else the user's, times its images. */
  function listPriceOf(row: BatchRowInput): ListPrice | undefined {
    return modelPrice(row.request.model, imagesOf(row));
  }

  function modelPrice(model: string, images: number): ListPrice | undefined {
    const catalog = state.prices[model];
    if (catalog !== undefined) return { usd: roundUsd(catalog * images), source: 'catalog' };
    const user = input.prices?.[model];
    if (user !== undefined) return { usd: roundUsd(user * images), source: 'user' };
    return undefined;
  }

  function imagesOf(row: BatchRowInput): number {
    return row.request.num_images ?? 1;
  }

  /**
   * Prices given since rows started without one (`resume --price`): a row in flight reserves its price now, and an
   * ended row of unknown spend counts at it. Undefined while a price is still missing.
   */
  function priceTheUnpriced(): number | undefined {
    for (const [rowId, { model, images }] of Object.entries(state.unpriced ?? {})) {
      const price = modelPrice(model, images);
      if (!price || !(rowId in state.inFlight)) continue;
      state.inFlight[rowId] = price.usd;
      delete state.unpriced![rowId];
    }
    let endedUsd = 0;
    for (const [model, images] of Object.entries(state.unpricedEnded ?? {})) {
      const price = modelPrice(model, images);
      if (!price) return undefined;
      endedUsd += price.usd;
    }
    return unpricedInFlight(state) > 0 ? undefined : roundUsd(endedUsd);
  }

  /**
   * What the row reserves against the cap: its list price, or the price a creation of its model was charged when
   * that is higher; before the patch, 0 for a price the catalog lacked.
   */
  function priceOf(row: BatchRowInput): number | null {
    if (!pricesKnownOrUnknown) return (state.prices[row.request.model] ?? 0) * (row.request.num_images ?? 1);
    const listed = listPriceOf(row)?.usd;
    const seen = state.pricesSeen?.[row.request.model];
    if (listed === undefined || seen === undefined) return listed ?? null;
    return Math.max(listed, roundUsd(seen * imagesOf(row)));
  }

  /** A row whose creation was charged more per image than its model's given price: counted from now on. */
  function notePriceSeen(record: RowRecord): void {
    const listed = modelPrice(record.model, 1);
    if (!listed) return;
    const perImage = chargedPerImage(record, state.inFlight[record.rowId], listed.usd);
    if (perImage === undefined || perImage <= (state.pricesSeen?.[record.model] ?? 0)) return;
    if (!patched(PRICES_SEEN_COUNT)) return;
    state.pricesSeen = { ...state.pricesSeen, [record.model]: perImage };
  }

  /** The prices given that the service contradicts, for the progress. */
  function pricesSeen(): PriceSeen[] {
    return Object.entries(state.pricesSeen ?? {}).flatMap(([model, chargedUsd]) => {
      const given = modelPrice(model, 1);
      return given && chargedUsd > given.usd ? [{ model, givenUsd: given.usd, source: given.source, chargedUsd }] : [];
    });
  }

  async function startRow(row: BatchRowInput): Promise<void> {
    const workflowId = rowWorkflowId(row.rowId);
    state.inFlight[row.rowId] = priceOf(row);
    loss?.started(row.rowId);
    const price = pricesKnownOrUnknown ? listPriceOf(row) : undefined;
    if (pricesKnownOrUnknown && !price) {
      state.unpriced = { ...state.unpriced, [row.rowId]: { model: row.request.model, images: imagesOf(row) } };
    }
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
            ...(price ? { price } : {}),
            outDir: input.outDir,
            parentWorkflowId: selfId,
            ...(input.maxAttempts === undefined ? {} : { maxAttempts: input.maxAttempts }),
            ...(input.maxPollWaitMs === undefined ? {} : { maxPollWaitMs: input.maxPollWaitMs }),
            ...(input.rowCheckEveryMs === undefined ? {} : { batchCheckEveryMs: input.rowCheckEveryMs }),
            ...(input.ledger ? { ledger: input.ledger } : {}),
          },
        ],
      });
      // The row reports before it closes; its close is only the safety net.
      void child.result().then(
        (record) => settleSilentRow(row.rowId, record),
        () => settleSilentRow(row.rowId),
      );
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // The batch was started again over a row that exists already: a closed row is counted from its record; a
      // running one is adopted (it reports to this run) and resumed, in case it waits on a stop of the old run.
      const found = await lookupRow({ workflowId });
      if (found.status === 'closed') {
        rowEnded(found.record);
        return;
      }
      unwatched.add(row.rowId);
      if (state.cancelling) return;
      await resumeRow(row.rowId);
    }
  }

  async function readNextPage(): Promise<BatchRowInput[]> {
    const page = await readBatchPage({
      file: input.file,
      maxRows: pageSize,
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
  async function waitUntil(fn: () => boolean): Promise<void> {
    if (deadlineMs === undefined) return condition(fn);
    await condition(fn, Math.max(1, deadlineMs - workflowNow()));
  }

  /**
   * Whether the cap holds the next row back. Counted against it: the known spend, rows of unknown outcome at their
   * price, and every reservation in flight; the next row reserves its price before it starts. A price that is not
   * known (the next row's, a row's in flight, an ended row's whose spend is unknown) holds the batch: the cap could
   * not be kept.
   */
  function spendCapHold(next: BatchRowInput): WaitReason | undefined {
    const capUsd = input.spendCapUsd;
    if (capUsd === undefined) return undefined;
    if (!pricesKnownOrUnknown) {
      const projected = state.spentUsd + reservedUsd(state) + (priceOf(next) ?? 0);
      if (projected <= capUsd + 1e-9) return undefined;
      return { kind: 'spend_cap', capUsd, spentUsd: state.spentUsd, reservedUsd: reservedUsd(state) };
    }
    const nextPrice = priceOf(next);
    const unpricedUsd = priceTheUnpriced();
    if (nextPrice === null || unpricedUsd === undefined) {
      const models = [
        next.request.model,
        ...Object.values(state.unpriced ?? {}).map((r) => r.model),
        ...Object.keys(state.unpricedEnded ?? {}),
      ];
      return { kind: 'price_unknown', capUsd, models: [...new Set(models)].filter((m) => !modelPrice(m, 1)).sort() };
    }
    if (committedUsd(state) + unpricedUsd + nextPrice <= capUsd + 1e-9) return undefined;
    return { kind: 'spend_cap', capUsd, spentUsd: state.spentUsd, reservedUsd: reservedUsd(state) };
  }

  function capHoldText(hold: WaitReason): string {
    if (hold.kind === 'price_unknown') {
      return (
        `spend cap of ${hold.capUsd} USD: no price is known for ${hold.models.join(', ')}; ` +
        `resume with --price ${hold.models[0]}=<usd per image>`
      );
    }
    return `spend cap of ${input.spendCapUsd} USD reached`;
  }

  /**
   * The safety net: a row in flight closed and its report did not come first. Its record is its result, or, when
   * it closed without one (terminated), what Temporal keeps of it; a row that completed has already reported,
   * and counting is idempotent.
   */
  async function settleSilentRow(rowId: string, result?: RowRecord): Promise<void> {
    if (!(rowId in state.inFlight)) return;
    const lookup = result
      ? { status: 'closed' as const, record: result }
      : await lookupRow({ workflowId: rowWorkflowId(rowId) });
    if (lookup.status === 'closed') {
      unwatched.delete(rowId);
      rowEnded(lookup.record);
    }
  }

  function unwatchedInFlight(): string[] {
    return [...unwatched].filter((rowId) => rowId in state.inFlight);
  }

  /** Starts the timer of the next look-up of the unwatched rows in flight, if there are any (one timer at a time). */
  function armRowCheck(): void {
    if (rowCheckArmed || unwatchedInFlight().length === 0) return;
    rowCheckArmed = true;
    void sleep(input.rowCheckEveryMs ?? ROW_CHECK_EVERY_MS).then(
      () => {
        rowCheckArmed = false;
        rowCheckDue = true;
      },
      () => undefined,
    );
  }

  /** Asks after every unwatched row in flight; those that closed are counted from their records. */
  async function checkUnwatchedRows(): Promise<void> {
    rowCheckDue = false;
    await Promise.all(unwatchedInFlight().map((rowId) => settleSilentRow(rowId)));
  }

  function continueAsNewWith(): Promise<never> {
    return continueAsNew<typeof batchWorkflow>({ ...input, state });
  }
}

export { batchWorkflowId };
