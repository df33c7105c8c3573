import type { StopLossState } from './stop-loss';
import {
  keyMoney,
  PriceSource,
  roundUsd,
  type KeyRecord,
  type BatchCursor,
  LIMIT_MEMORY_MS,
  type BindingLimit,
  type BatchProgress,
  type BatchRowInput,
  type BatchStopDetails,
  type PriceSeen,
  type RowRecord,
  type RowState,
  type WaitReason,
  type WindowState,
} from '../model';
import { AdaptiveWindow } from './window';

/**
 * Everything a batch remembers, carried across continue-as-new. Bounded: rows in flight (at most the window)
 * and rows blocked by a batch-level stop (a subset of those), never the rows that have ended.
 */
export interface BatchState {
  cursor?: BatchCursor;
  fileDone: boolean;
  /** Rows read from the file but not started yet (carried only when a run ends mid-page). */
  pending: BatchRowInput[];
  /** Row ids in flight, with the price reserved for each against the spend cap (null: its price is not known). */
  inFlight: Record<string, number | null>;
  blocked: string[];
  counts: Record<RowState, number>;
  rowsRead: number;
  invalidRows: number;
  started: number;
  /** Net spend of the ended rows whose spend is known. */
  spentUsd: number;
  refundedUsd: number;
  /** Ended rows whose spend is not known (no price shown, or the outcome unknown). */
  unknownSpendRows?: number;
  /**
   * The most those rows may have spent, as far as their prices are known (their reservations): what the spend cap
   * counts them as.
   */
  unknownSpendAtMostUsd?: number;
  /**
   * Rows in flight whose price was not known when they started: their model and images, so that a price given later
   * (`resume --price`) becomes their reservation.
   */
  unpriced?: Record<string, { model: string; images: number }>;
  /** Images, by model, of ended rows of unknown spend whose price was not known: counted once a price is. */
  unpricedEnded?: Record<string, number>;
  startedAtMs: number;
  runs: number;
  /** Keys rows tried after their first (a refunded failure or a 402 before), as the rows told it. */
  newKeys?: number;
  pausedBy?: string;
  stop?: BatchStopDetails;
  cancelling: boolean;
  /** Model id to price per image (USD), from the catalog. */
  prices: Record<string, number>;
  /**
   * Model id to the most a creation of it was charged per image (USD), where that is above the price given: the
   * price given is a claim, and the cap counts the higher.
   */
  pricesSeen?: Record<string, number>;
  /** Net spend of the ended rows counted at a price the user gave, which no creation showed (part of spentUsd). */
  spentUnconfirmedUsd?: number;
  /** Models whose cost a record of this batch showed: a price given for them is confirmed, or corrected. */
  pricesConfirmed?: string[];
  /** The canary and the breakers, in a batch started with them. */
  stopLoss?: StopLossState;
  /** The adaptive window of rows in flight, in a batch started with it (`adaptive-window`). */
  window?: WindowState;
}

export function emptyCounts(): Record<RowState, number> {
  return { succeeded: 0, reused: 0, images_unsaved: 0, failed: 0, unknown: 0, cancelled: 0, not_run: 0 };
}

export function newBatchState(nowMs: number): BatchState {
  return {
    fileDone: false,
    pending: [],
    inFlight: {},
    blocked: [],
    counts: emptyCounts(),
    rowsRead: 0,
    invalidRows: 0,
    started: 0,
    spentUsd: 0,
    refundedUsd: 0,
    startedAtMs: nowMs,
    runs: 0,
    cancelling: false,
    prices: {},
  };
}

/**
 * Applies a row's end to the state; a second report for the same row (a replayed signal) changes nothing. Its
 * reservation is released; its net spend counts when known; when not, the row is counted as of unknown spend, at
 * most its reservation (what the cap keeps counting for it).
 */
export function applyRowDone(
  state: BatchState,
  record: Pick<RowRecord, 'rowId' | 'state' | 'netUsd' | 'refundedUsd'> & Partial<Pick<RowRecord, 'keys'>>,
): boolean {
  if (!(record.rowId in state.inFlight)) return false;
  const reserved = state.inFlight[record.rowId];
  delete state.inFlight[record.rowId];
  state.blocked = state.blocked.filter((id) => id !== record.rowId);
  // A state carried from a run that knew fewer states starts at 0.
  state.counts[record.state] = (state.counts[record.state] ?? 0) + 1;
  const unpriced = state.unpriced?.[record.rowId];
  if (state.unpriced) delete state.unpriced[record.rowId];
  if (record.netUsd === null) {
    state.unknownSpendRows = (state.unknownSpendRows ?? 0) + 1;
    if (typeof reserved === 'number') {
      state.unknownSpendAtMostUsd = roundUsd((state.unknownSpendAtMostUsd ?? 0) + reserved);
    } else if (unpriced) {
      state.unpricedEnded = { ...state.unpricedEnded };
      state.unpricedEnded[unpriced.model] = (state.unpricedEnded[unpriced.model] ?? 0) + unpriced.images;
    }
  } else {
    state.spentUsd = roundUsd(state.spentUsd + record.netUsd);
    const atUserPrice = userPricedNetUsd(record.keys ?? []);
    if (atUserPrice > 0) state.spentUnconfirmedUsd = roundUsd((state.spentUnconfirmedUsd ?? 0) + atUserPrice);
  }
  if (record.refundedUsd !== null) state.refundedUsd = roundUsd(state.refundedUsd + record.refundedUsd);
  return true;
}

/** What a row's keys hold at a price the user gave (none of its creations showed a cost). */
function userPricedNetUsd(keys: readonly Pick<KeyRecord, 'outcome' | 'chargedUsd' | 'priceSource'>[]): number {
  return keys.filter((k) => k.priceSource === PriceSource.User).reduce((sum, k) => sum + (keyMoney(k).netUsd ?? 0), 0);
}

/** What the rows in flight reserve against the cap (their known prices). */
export function reservedUsd(state: BatchState): number {
  return roundUsd(Object.values(state.inFlight).reduce<number>((a, b) => a + (b ?? 0), 0));
}

/** Rows in flight whose price is not known. */
export function unpricedInFlight(state: BatchState): number {
  return Object.values(state.inFlight).filter((v) => v === null).length;
}

/**
 * What counts against a spend cap now: the known net spend, the worst case of rows of unknown outcome, and the
 * reservations of the rows in flight.
 */
export function committedUsd(state: BatchState): number {
  return roundUsd(state.spentUsd + (state.unknownSpendAtMostUsd ?? 0) + reservedUsd(state));
}

/** The limit the latest row to end reported, and when (workflow time). */
export interface LimitSeen {
  limit: BindingLimit;
  atMs: number;
}

/**
 * The price per image a row's creation was charged, from its keys whose creation said what it cost, against the row's
 * reservation (`reservedUsd`, its list price `listedPerImageUsd` times its images); undefined when none said more.
 */
export function chargedPerImage(
  record: Pick<RowRecord, 'keys'>,
  reservedUsd: number | null | undefined,
  listedPerImageUsd: number,
): number | undefined {
  if (typeof reservedUsd !== 'number' || reservedUsd <= 0 || listedPerImageUsd <= 0) return undefined;
  const charged = record.keys
    .filter((k) => k.priceSource === 'creation' && k.chargedUsd !== undefined)
    .map((k) => k.chargedUsd!);
  if (charged.length === 0) return undefined;
  const perImage = roundUsd((Math.max(...charged) / reservedUsd) * listedPerImageUsd);
  return perImage > listedPerImageUsd ? perImage : undefined;
}

export function progressOf(
  batchId: string,
  state: BatchState,
  nowMs: number,
  waiting: WaitReason | undefined,
  done: boolean,
  spendCapUsd?: number,
  limitSeen?: LimitSeen,
  pricesSeen?: PriceSeen[],
): BatchProgress {
  const ended = Object.values(state.counts).reduce((a, b) => a + b, 0);
  const seconds = Math.max(0.001, (nowMs - state.startedAtMs) / 1000);
  const status: BatchProgress['status'] = done
    ? state.cancelling
      ? 'cancelled'
      : 'completed'
    : state.cancelling
      ? 'cancelling'
      : state.pausedBy || state.stop || state.stopLoss?.trip
        ? 'paused'
        : 'running';
  return {
    batchId,
    status,
    rowsRead: state.rowsRead,
    invalidRows: state.invalidRows,
    started: state.started,
    inFlight: Object.keys(state.inFlight).length,
    counts: { ...state.counts },
    spentUsd: state.spentUsd,
    ...(state.spentUnconfirmedUsd ? { unconfirmedUsd: state.spentUnconfirmedUsd } : {}),
    refundedUsd: state.refundedUsd,
    unknownSpendRows: state.unknownSpendRows ?? 0,
    reservedUsd: reservedUsd(state),
    unpricedInFlight: unpricedInFlight(state),
    ...(spendCapUsd === undefined
      ? {}
      : { spendCapUsd, leftUsd: Math.max(0, roundUsd(spendCapUsd - committedUsd(state))) }),
    rowsPerSecond: Math.round((ended / seconds) * 100) / 100,
    ...(waiting ? { waiting } : {}),
    ...(limitSeen && !done && nowMs - limitSeen.atMs <= LIMIT_MEMORY_MS ? { limit: limitSeen.limit } : {}),
    runs: state.runs,
    newKeys: state.newKeys ?? 0,
    ...(pricesSeen?.length ? { pricesSeen } : {}),
    ...(state.stopLoss ? { canary: state.stopLoss.canary } : {}),
    ...(state.window && !done ? { window: new AdaptiveWindow(state.window).view(nowMs) } : {}),
    done,
  };
}
