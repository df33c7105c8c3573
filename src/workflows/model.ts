/**
 * The data of the workflows: inputs, results, progress. Types only, shared by workflows, the CLI and tests.
 */
import type { BatchStopDetails } from '../api/failure-types';
import type { CreationRequest, DownloadedImage } from '../activities/types';

/** Final state of a row. */
export const RowState = {
  Succeeded: 'succeeded',
  /** Ended without images: rejected, safety filter, retryable failures past the attempt limit. */
  Failed: 'failed',
  /** The outcome of a submission stayed unknown (it may have been charged): reconcile before re-running. */
  Unknown: 'unknown',
  Cancelled: 'cancelled',
  /** Never started (deadline passed): ready to be run again. */
  NotRun: 'not_run',
} as const;
export type RowState = (typeof RowState)[keyof typeof RowState];

export interface PromptWorkflowInput {
  batchId: string;
  rowId: string;
  /** Line of the row in the batch file, for messages. */
  line?: number;
  request: CreationRequest;
  /**
   * Attempts at most (each a new idempotency key). Only refunded failures start a new attempt.
   * @default 3
   */
  maxAttempts?: number;
  /** Output folder of the batch, where the images go. */
  outDir: string;
  /**
   * Longest total wait for one creation to end, polls and waits included, before the row fails with a clear
   * message.
   * @default 30 minutes
   */
  maxPollWaitMs?: number;
  /**
   * Workflow id of the batch to report to; rows started alone report to nobody.
   * @default undefined
   */
  parentWorkflowId?: string;
}

/** One attempt of a row: one idempotency key. */
export interface AttemptRecord {
  attempt: number;
  idempotencyKey: string;
  creationId?: string;
  /** How the attempt ended: `accepted`, then `succeeded` / `failed`, or the failure type of the submission. */
  outcome: string;
  error?: string;
  chargedUsd?: number;
  refundedUsd?: number;
}

/** The result record of a row. */
export interface PromptResult {
  batchId: string;
  rowId: string;
  line?: number;
  state: RowState;
  prompt: string;
  model: string;
  creationIds: string[];
  attempts: AttemptRecord[];
  images: DownloadedImage[];
  /** The service's words (a failure string, or a rejection message with its field errors). */
  error?: string;
  /** Whether the error is retryable as is (a re-run could succeed). */
  errorRetryable?: boolean;
  /** The idempotency key whose outcome is unknown (state `unknown`). */
  unknownKey?: string;
  chargedUsd: number;
  refundedUsd: number;
}

/** What a row tells its batch when it ends: small, so that the batch's history stays small. */
export interface RowSummary {
  rowId: string;
  state: RowState;
  chargedUsd: number;
  refundedUsd: number;
  attempts: number;
}

/** Why a batch is not starting new rows right now. */
export type WaitReason =
  | { kind: 'paused'; reason: string }
  | { kind: 'batch_stop'; details: BatchStopDetails }
  | { kind: 'spend_cap'; capUsd: number; spentUsd: number }
  | { kind: 'window_full'; concurrency: number }
  | { kind: 'reading' };

export interface BatchProgress {
  batchId: string;
  status: 'running' | 'paused' | 'cancelling' | 'completed' | 'cancelled';
  rowsRead: number;
  /** Rows of the file that were invalid (they never start; `imagebatch validate` lists them). */
  invalidRows: number;
  started: number;
  inFlight: number;
  counts: Record<RowState, number>;
  spentUsd: number;
  refundedUsd: number;
  /** Rows ended per second since the batch started (workflow time). */
  rowsPerSecond: number;
  waiting?: WaitReason;
  /** How many continue-as-new hops this batch has made. */
  runs: number;
  done: boolean;
}
