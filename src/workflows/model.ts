/**
 * The data of the workflows: inputs, results, progress. Types only, shared by workflows, the CLI and tests.
 */
import type { BatchStopDetails } from '../api/failure-types';
import type { CreationRequest, DownloadedImage, ListPrice, PriceSource } from '../activities/types';

/** Final state of a row. Every row ends in exactly one, with its {@link RowRecord}. */
export const RowState = {
  /** Generated, and every image saved. */
  Succeeded: 'succeeded',
  /**
   * Paid and generated, but the images could not be saved (a download failed for good, or kept failing until the
   * maximum wait). Not to be submitted again: the creation exists; its images may still be fetched from its id.
   */
  ImagesUnsaved: 'images_unsaved',
  /** Ended without images and without money at stake: rejected, the safety filter, refunded failures past the limit. */
  Failed: 'failed',
  /** The outcome of a key is not known (it may have been charged): resolve it with its own key, never a new one. */
  Unknown: 'unknown',
  /** Cancelled (or terminated), at whatever point it was; its record says which keys may have been charged. */
  Cancelled: 'cancelled',
  /** Never started (deadline passed, batch cancelled first): nothing was sent for it. */
  NotRun: 'not_run',
} as const;
export type RowState = (typeof RowState)[keyof typeof RowState];

/** What is known of one idempotency key's outcome. */
export const KeyOutcome = {
  /** Being submitted: no answer yet. */
  Submitting: 'submitting',
  /** 202: the creation is in flight (charged up front). */
  Accepted: 'accepted',
  /** The creation succeeded (charged). */
  Succeeded: 'succeeded',
  /** The creation failed at generation and was refunded. */
  Failed: 'failed',
  /** 502 or 503 at submission: charged and refunded, the job never ran. */
  Refunded: 'refunded',
  /** 400 or 404 at submission: judged on its merits, not charged. */
  Rejected: 'rejected',
  /** 402 at submission: the wallet or the budget could not cover it, not charged. */
  Declined: 'declined',
  /** No answer was ever known (no response, timeout, 500, cancelled or terminated in flight): may have been charged. */
  Unknown: 'unknown',
  /** Accepted, then the service said the creation does not exist: charged, outcome unknown. */
  Lost: 'lost',
  /** Accepted, still in flight when the row's maximum wait ended: charged; it may still end at the service. */
  TimedOut: 'timed_out',
} as const;
export type KeyOutcome = (typeof KeyOutcome)[keyof typeof KeyOutcome];

/** One idempotency key of a row (one attempt), and all that is known of it. */
export interface KeyRecord {
  /** 1, 2, ...: the key's number within the row (a new key only after a refunded or declined attempt). */
  attempt: number;
  idempotencyKey: string;
  outcome: KeyOutcome;
  creationId?: string;
  /**
   * What this key was charged (USD), when known: what the creation said, else the request's list price (catalog,
   * then the user's). Absent: unknown, or nothing charged (the outcome says which).
   */
  chargedUsd?: number;
  /** Where `chargedUsd` came from. */
  priceSource?: PriceSource;
  /** What came back (USD): all of the charge, for a failed creation, a 502 or 503 (refunded in full). */
  refundedUsd?: number;
  /** The service's words for this key's end. */
  error?: string;
}

/**
 * The complete record of a row, whatever ended it: the row workflow's result, what it signals to its batch, and
 * what results.csv, results.jsonl and errors.csv are written from.
 */
export interface RowRecord {
  batchId: string;
  rowId: string;
  /** Line of the row in the batch file. */
  line?: number;
  state: RowState;
  prompt: string;
  model: string;
  /** Every key used, in order. */
  keys: KeyRecord[];
  /** Every creation id the service gave, in order. */
  creationIds: string[];
  images: DownloadedImage[];
  /**
   * Money, in USD, summed over the keys. `null` is unknown, never 0: a key that may hold money whose price nobody
   * showed (no cost on the creation, no price in the catalog, none given), or whose outcome is not known. A refund
   * is all of what was charged, so a refunded key's net is 0 even when its price is unknown.
   */
  chargedUsd: number | null;
  refundedUsd: number | null;
  /** Charged less refunded. */
  netUsd: number | null;
  /** The service's words (a failure string, a rejection with its field errors), or what ended the row. */
  error?: string;
  /**
   * Whether the row may be submitted again under a new key without risk of paying twice: true only when every key
   * it used is known not to have been charged, or refunded.
   */
  resubmittable: boolean;
}

export interface PromptWorkflowInput {
  batchId: string;
  rowId: string;
  /** Line of the row in the batch file, for messages. */
  line?: number;
  request: CreationRequest;
  /**
   * The request's price before it is sent (catalog, else the user's), for keys whose creation does not say what it
   * cost: a refunded key is refunded this much, a charged one charged it.
   * @default unknown
   */
  price?: ListPrice;
  /**
   * Attempts at most (each a new idempotency key). Only refunded failures start a new attempt.
   * @default 3
   */
  maxAttempts?: number;
  /** Output folder of the batch, where the images go. */
  outDir: string;
  /**
   * Longest wait for one creation to end after its acceptance, polls and waits included, before the row gives up
   * on it with a clear message.
   * @default 30 minutes
   */
  maxPollWaitMs?: number;
  /**
   * Workflow id of the batch to report to; rows started alone report to nobody.
   * @default undefined
   */
  parentWorkflowId?: string;
  /**
   * While blocked by a batch-level stop, how often the row makes sure its batch still runs; a row whose batch is
   * gone ends `cancelled`.
   * @default ROW_CHECK_EVERY_MS (5 minutes)
   */
  batchCheckEveryMs?: number;
}

/** Why a batch is not starting new rows right now. */
export type WaitReason =
  | { kind: 'paused'; reason: string }
  | { kind: 'batch_stop'; details: BatchStopDetails }
  | { kind: 'spend_cap'; capUsd: number; spentUsd: number; reservedUsd: number }
  /** A spend cap is set and the price of these models is not known (the next row's, or of rows in flight or ended). */
  | { kind: 'price_unknown'; capUsd: number; models: string[] }
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
  /** Net spend of the rows that ended whose spend is known (USD): the batch spent at least this. */
  spentUsd: number;
  /** Refunds of the rows that ended whose refunds are known (USD). */
  refundedUsd: number;
  /** Rows that ended whose spend is not known (no price shown, or the outcome unknown): on top of `spentUsd`. */
  unknownSpendRows: number;
  /** Reserved against the spend cap for the rows in flight (their list prices, USD). */
  reservedUsd: number;
  /** Rows in flight whose price is not known (nothing reserved for them). */
  unpricedInFlight: number;
  /** The spend cap, when the batch has one. */
  spendCapUsd?: number;
  /** What the cap leaves: cap less spent, reserved and the worst case of rows of unknown outcome (never below 0). */
  leftUsd?: number;
  /** Rows ended per second since the batch started (workflow time). */
  rowsPerSecond: number;
  waiting?: WaitReason;
  /** How many continue-as-new hops this batch has made. */
  runs: number;
  /** Keys rows tried after their first (each after a refunded failure or a 402), as far as the rows said. */
  newKeys: number;
  done: boolean;
}

/** What a resume may change (`imagebatch resume`). */
export interface ResumeOptions {
  /** A new spend cap (USD). */
  spendCapUsd?: number;
  /** Prices per image (USD) by model, added to the batch's own (`--price`); the catalog's still come first. */
  prices?: Record<string, number>;
}
