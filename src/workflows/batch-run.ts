/**
 * What one run of a batch knows and decides, between the commands its workflow issues: the state carried across
 * continue-as-new, the stop-loss, the window, the prices, and what this run alone remembers. A plain class with no
 * Temporal in it: the batch's workflow wires its signals and query to these methods and issues every command itself,
 * as in Temporal's safe-message-handlers sample. Workflow code imports it: no I/O, no Node built-ins, and the clock
 * comes in (workflow time).
 */
import type {
  BatchProgress,
  BatchRowInput,
  BatchStopDetails,
  ListPrice,
  ResumeOptions,
  RowRecord,
  RowReport,
  WaitReason,
} from '../model';
import type { BatchWorkflowInput } from './batch-input';
import { BatchPrices, imagesOf } from './batch-prices';
import { applyRowDone, newBatchState, progressOf, type BatchState, type LimitSeen } from './batch-state';
import { StopLoss, type PriceNote } from './stop-loss';
import { AdaptiveWindow } from './window';

/** Rows in flight in a batch started before the adaptive window, when `concurrency` is not given. */
export const FIXED_WINDOW_DEFAULT = 8;

/** Why a batch pauses when `pause` says no reason. */
const PAUSED_BY_REQUEST = 'paused by request';

export class BatchRun {
  readonly state: BatchState;
  readonly prices: BatchPrices;
  /** Rows in flight at most in a batch started before the adaptive window. */
  readonly concurrency: number;
  /** Why the batch waits now, for the progress (set by the loop). */
  waiting: WaitReason | undefined;
  /** A resume came and is not handled yet. */
  resumeRequested = false;
  /**
   * Whether a row waits while a price given is unconfirmed (patch `declared-price-one-at-a-time`, which the batch
   * asks here); asked only when one would wait.
   * @default never
   */
  askPriceCheck: () => boolean = () => false;
  /** Rows whose close this run cannot see: carried from an earlier run, or found running when started again. */
  readonly unwatched: Set<string>;
  private readonly deadlineMs: number | undefined;
  /** Rows in flight already asked to cancel (by this run). */
  private readonly cancelSent = new Set<string>();
  /** The stop-loss, in a batch started with it (patch `stop-loss`). */
  private loss: StopLoss | undefined;
  /** The limit the latest row to end said binds: for the progress only (no command depends on it). */
  private limitSeen: LimitSeen | undefined;

  /**
   * @param input the batch's input (its spend cap and prices change on resume)
   * @param now workflow time, in ms
   * @param pricesKnownOrUnknown whether the batch runs with patch `prices-known-or-unknown`
   */
  constructor(
    private readonly input: BatchWorkflowInput,
    private readonly now: () => number,
    pricesKnownOrUnknown: boolean,
  ) {
    this.concurrency = Math.max(1, input.concurrency ?? FIXED_WINDOW_DEFAULT);
    this.deadlineMs = input.deadline ? Date.parse(input.deadline) : undefined;
    this.state = input.state ?? newBatchState(now());
    this.unwatched = new Set(Object.keys(this.state.inFlight));
    this.loss = this.state.stopLoss ? new StopLoss(this.state.stopLoss, input.stopLoss) : undefined;
    this.prices = new BatchPrices(this.state, input, pricesKnownOrUnknown);
  }

  /** The batch's progress while it runs (a stop that came while the last rows were in flight says why too). */
  progress(): BatchProgress {
    const { input, state, limitSeen, prices } = this;
    const waiting = this.waiting ?? this.blockedReason();
    return progressOf(
      input.batchId,
      state,
      this.now(),
      waiting,
      false,
      input.spendCapUsd,
      limitSeen,
      prices.pricesSeen(),
    );
  }

  /** The batch's result, once every row has ended. */
  result(): BatchProgress {
    const { input, state } = this;
    return progressOf(
      input.batchId,
      state,
      this.now(),
      undefined,
      true,
      input.spendCapUsd,
      undefined,
      this.prices.pricesSeen(),
    );
  }

  /**
   * A row reported its end (`rowDone`): counted once, seen by the stop-loss and the window. `pricesSeenCount` is asked
   * only when the row was charged above its given price (the batch asks patch `prices-seen-count` there).
   */
  rowDone(record: RowRecord, report: RowReport | undefined, pricesSeenCount: () => boolean): void {
    const price = this.loss ? this.prices.priceNoteOf(record) : undefined;
    this.prices.notePriceSeen(record, pricesSeenCount);
    this.prices.notePriceConfirmed(record);
    if (this.rowEnded(record, price) && this.state.window)
      new AdaptiveWindow(this.state.window).rowEnded(report?.limit, this.now(), report?.refused === true);
    if (report?.limit) this.limitSeen = { limit: report.limit, atMs: this.now() };
  }

  /** A row will try a new key (`rowNewKey`). */
  rowNewKey(): void {
    this.state.newKeys = (this.state.newKeys ?? 0) + 1;
  }

  /** A row met a batch-level stop and waits for a resume (`rowBlocked`). */
  rowBlocked(rowId: string, details: BatchStopDetails): void {
    this.state.stop = details;
    if (!this.state.blocked.includes(rowId)) this.state.blocked.push(rowId);
  }

  pause(reason?: string): void {
    this.state.pausedBy = reason ?? PAUSED_BY_REQUEST;
  }

  /** A resume, with a new spend cap or prices maybe; the loop handles it ({@link takeResume}). */
  resume(options?: ResumeOptions): void {
    if (options?.spendCapUsd !== undefined) this.input.spendCapUsd = options.spendCapUsd;
    if (options?.prices) this.input.prices = { ...this.input.prices, ...options.prices };
    this.resumeRequested = true;
  }

  /** A cancel, by signal or through Temporal. */
  cancel(): void {
    this.state.cancelling = true;
  }

  /** Whether the stop-loss wants a canary (asked at the batch's start). */
  wantsCanary(): boolean {
    return StopLoss.canaryWanted(this.input.stopLoss);
  }

  /** The stop-loss starts, `proven` when the worker's settings were proven on its store (no canary then). */
  startStopLoss(proven: boolean): void {
    this.state.stopLoss = StopLoss.start(this.input.stopLoss, proven);
    this.loss = new StopLoss(this.state.stopLoss, this.input.stopLoss);
  }

  /** The adaptive window starts, `concurrency` its start and ceiling when given. */
  startWindow(sawtooth: boolean): void {
    const given = this.input.concurrency === undefined ? {} : { initial: this.concurrency, ceiling: this.concurrency };
    this.state.window = AdaptiveWindow.start(given, sawtooth ? 'sawtooth' : undefined);
  }

  /**
   * A resume not handled yet: clears the pause and the stop; the rows that waited, for the batch to resume. Undefined
   * when no resume came.
   */
  takeResume(): string[] | undefined {
    if (!this.resumeRequested) return undefined;
    this.resumeRequested = false;
    delete this.state.pausedBy;
    delete this.state.stop;
    this.loss?.resumed();
    const blocked = this.state.blocked;
    this.state.blocked = [];
    return blocked;
  }

  /** The canary's proof of the worker's settings, once, for the batch to record. */
  takeProof(): { rowId: string; creationId?: string } | undefined {
    return this.loss?.takeProof();
  }

  deadlinePassed(): boolean {
    return this.deadlineMs !== undefined && this.now() >= this.deadlineMs;
  }

  /** How long until the deadline (at least 1 ms), or undefined without one. */
  untilDeadlineMs(): number | undefined {
    return this.deadlineMs === undefined ? undefined : Math.max(1, this.deadlineMs - this.now());
  }

  /** Full: the window's rows in flight, the canary alone, or one row while a price given is unconfirmed. */
  windowFull(): boolean {
    return (
      Object.keys(this.state.inFlight).length >= this.windowSize() ||
      this.canaryHold() !== undefined ||
      this.priceHold() !== undefined
    );
  }

  /**
   * A row is in flight and the next counts against a cap at a price the user gave that no record has confirmed: it
   * waits. `askPriceCheck` (patch `declared-price-one-at-a-time`) is asked only then.
   */
  priceHold(): WaitReason | undefined {
    const next = this.state.pending[0];
    if (!next || Object.keys(this.state.inFlight).length === 0) return undefined;
    const unconfirmed = this.prices.unconfirmedPrice(next);
    if (!unconfirmed || !this.askPriceCheck()) return undefined;
    return { kind: 'price_unconfirmed', ...unconfirmed };
  }

  /** Rows in flight allowed now: the adaptive window's, or `concurrency` in a batch started before it. */
  windowSize(): number {
    return this.state.window ? new AdaptiveWindow(this.state.window).size : this.concurrency;
  }

  canaryHold(): WaitReason | undefined {
    const held = this.loss?.holds();
    return held?.kind === 'canary' ? held : undefined;
  }

  /** What holds the batch until a person acts: a stop of the service, a pause, a breaker of the stop-loss. */
  blockedReason(): WaitReason | undefined {
    if (this.state.stop) return { kind: 'batch_stop', details: this.state.stop };
    if (this.state.pausedBy) return { kind: 'paused', reason: this.state.pausedBy };
    const held = this.loss?.holds();
    return held?.kind === 'stop_loss' ? held : undefined;
  }

  /**
   * A row's end, counted once, and seen by the stop-loss. Whether the row was one of the batch's in flight (a report
   * seen before changes nothing).
   */
  rowEnded(record: RowRecord, price?: PriceNote): boolean {
    const ended = applyRowDone(this.state, record);
    if (ended) this.loss?.ended(record, price);
    return ended;
  }

  /**
   * A row about to start: it reserves its price, the stop-loss sees it, and a row whose price is not known is noted.
   * Its list price, for the row's record, and whether it is a canary that proves the key (`provesKey` is asked of a
   * canary only).
   */
  rowStarting(
    row: BatchRowInput,
    provesKey: () => boolean = () => false,
  ): { price: ListPrice | undefined; proveKey: boolean } {
    const { state, prices } = this;
    state.inFlight[row.rowId] = prices.priceOf(row);
    const proveKey = this.loss?.started(row.rowId, provesKey) ?? false;
    const price = prices.knownOrUnknown ? prices.listPriceOf(row) : undefined;
    if (prices.knownOrUnknown && !price) {
      state.unpriced = { ...state.unpriced, [row.rowId]: { model: row.request.model, images: imagesOf(row) } };
    }
    state.started += 1;
    return { price, proveKey };
  }

  /** Unwatched rows still in flight. */
  unwatchedInFlight(): string[] {
    return [...this.unwatched].filter((rowId) => rowId in this.state.inFlight);
  }

  /** Rows in flight not asked to cancel yet, noted as asked. */
  takeRowsToCancel(): string[] {
    const rowIds = Object.keys(this.state.inFlight).filter((rowId) => !this.cancelSent.has(rowId));
    for (const rowId of rowIds) this.cancelSent.add(rowId);
    return rowIds;
  }

  /** A cancel is under way and a row in flight has not been asked to cancel yet. */
  rowsLeftToCancel(): boolean {
    return this.state.cancelling && Object.keys(this.state.inFlight).some((rowId) => !this.cancelSent.has(rowId));
  }
}
