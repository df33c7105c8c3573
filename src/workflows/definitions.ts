import { defineQuery, defineSignal } from '@temporalio/workflow';
import {
  QueryName,
  SignalName,
  type BatchProgress,
  type BatchStopDetails,
  type ResumeOptions,
  type RowRecord,
  type RowReport,
} from '../model';

/** A person pauses the batch: no new row starts; rows in flight finish. */
export const pauseSignal = defineSignal<[reason?: string]>(SignalName.Pause);
/** A person resumes the batch, also after a batch-level stop (authentication, balance, budget, spend cap). */
export const resumeSignal = defineSignal<[options?: ResumeOptions]>(SignalName.Resume);
/** A person cancels the batch: no new row starts, rows in flight are cancelled cleanly. */
export const cancelSignal = defineSignal<[reason?: string]>(SignalName.Cancel);
/** Progress of a batch, at any time. */
export const progressQuery = defineQuery<BatchProgress>(QueryName.Progress);

/**
 * Row to batch: this row has ended, with its complete record, whatever ended it. Sent by the row itself (by workflow
 * id, so it reaches the batch's current run): the batch's one channel. The report says what else the row saw (rows
 * from before patch `row-reports-limit` send none).
 */
export const rowDoneSignal = defineSignal<[record: RowRecord, report?: RowReport]>(SignalName.RowDone);
/** Row to batch: the service said the whole batch must stop until a person acts; this row waits. */
export const rowBlockedSignal = defineSignal<[rowId: string, details: BatchStopDetails]>(SignalName.RowBlocked);
/**
 * Row to batch: this row still waits on a batch-level stop it reported. Sent only to learn that the batch still runs
 * (a signal to a closed workflow fails); the batch takes no action on it, so one arriving after a resume cannot
 * hold the batch again.
 */
export const rowWaitingSignal = defineSignal<[rowId: string]>(SignalName.RowWaiting);
/** Row to batch: this row is about to try a new key (number `keyNumber`) after a refunded or declined one. */
export const rowNewKeySignal = defineSignal<[rowId: string, keyNumber: number]>(SignalName.RowNewKey);
/** Batch to row: carry on after a batch-level stop (also sent to a row a new run of its batch adopts). */
export const rowResumeSignal = defineSignal(SignalName.RowResume);
