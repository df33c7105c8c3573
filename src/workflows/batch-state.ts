import type { BatchStopDetails } from '../api/failure-types';
import type { BatchCursor, BatchRowInput } from '../activities/types';
import type { BatchProgress, RowRecord, RowState, WaitReason } from './model';

/**
 * Everything a batch remembers, carried across continue-as-new. Bounded: rows in flight (at most the window)
 * and rows blocked by a batch-level stop (a subset of those), never the rows that have ended.
 */
export interface BatchState {
  cursor?: BatchCursor;
  fileDone: boolean;
  /** Rows read from the file but not started yet (carried only when a run ends mid-page). */
  pending: BatchRowInput[];
  /** Row ids in flight, with the price reserved for each against the spend cap. */
  inFlight: Record<string, number>;
  blocked: string[];
  counts: Record<RowState, number>;
  rowsRead: number;
  invalidRows: number;
  started: number;
  spentUsd: number;
  refundedUsd: number;
  startedAtMs: number;
  runs: number;
  /** Keys rows tried after their first (a refunded failure or a 402 before), as the rows told it. */
  newKeys?: number;
  pausedBy?: string;
  stop?: BatchStopDetails;
  cancelling: boolean;
  /** Model id to price per image, from the catalog, for the spend cap. */
  prices: Record<string, number>;
}

export function emptyCounts(): Record<RowState, number> {
  return { succeeded: 0, images_unsaved: 0, failed: 0, unknown: 0, cancelled: 0, not_run: 0 };
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

/** Applies a row's end to the state; a second report for the same row (a replayed signal) changes nothing. */
export function applyRowDone(
  state: BatchState,
  record: Pick<RowRecord, 'rowId' | 'state' | 'netUsd' | 'refundedUsd'>,
): boolean {
  if (!(record.rowId in state.inFlight)) return false;
  delete state.inFlight[record.rowId];
  state.blocked = state.blocked.filter((id) => id !== record.rowId);
  state.counts[record.state] += 1;
  state.spentUsd = round6(state.spentUsd + record.netUsd);
  state.refundedUsd = round6(state.refundedUsd + record.refundedUsd);
  return true;
}

export function reservedUsd(state: BatchState): number {
  return Object.values(state.inFlight).reduce((a, b) => a + b, 0);
}

export function progressOf(
  batchId: string,
  state: BatchState,
  nowMs: number,
  waiting: WaitReason | undefined,
  done: boolean,
): BatchProgress {
  const ended = Object.values(state.counts).reduce((a, b) => a + b, 0);
  const seconds = Math.max(0.001, (nowMs - state.startedAtMs) / 1000);
  const status: BatchProgress['status'] = done
    ? state.cancelling
      ? 'cancelled'
      : 'completed'
    : state.cancelling
      ? 'cancelling'
      : state.pausedBy || state.stop
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
    refundedUsd: state.refundedUsd,
    rowsPerSecond: Math.round((ended / seconds) * 100) / 100,
    ...(waiting ? { waiting } : {}),
    runs: state.runs,
    newKeys: state.newKeys ?? 0,
    done,
  };
}

function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
