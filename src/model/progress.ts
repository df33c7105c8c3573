/** A batch as it runs: its progress, why it waits, and what a resume may change. */
import type { BatchStopDetails } from './failure';
import type { BindingLimit } from './limits';
import type { RowState } from './record';
import type { CanaryPhase, StopLossTrip } from './stop-loss';

/** Why a batch is not starting new rows right now. */
export type WaitReason =
  | { kind: 'paused'; reason: string }
  | { kind: 'batch_stop'; details: BatchStopDetails }
  | { kind: 'spend_cap'; capUsd: number; spentUsd: number; reservedUsd: number }
  /** A spend cap is set and the price of these models is not known (the next row's, or of rows in flight or ended). */
  | { kind: 'price_unknown'; capUsd: number; models: string[] }
  | { kind: 'window_full'; concurrency: number }
  /** A stop-loss breaker paused the batch (`resume` goes on, with the breaker's count afresh). */
  | { kind: 'stop_loss'; trip: StopLossTrip }
  /**
   * A spend cap counts on the price the user gave for this model, and no record of the batch has shown what the
   * service charges for it yet: one row at a time until one does.
   */
  | { kind: 'price_unconfirmed'; model: string; givenUsd: number }
  /** The canary row is in flight: the others start once it has ended `succeeded`. */
  | { kind: 'canary'; rowId: string }
  | { kind: 'reading' };

/** What a row tells its batch besides its record when it ends. */
export interface RowReport {
  /**
   * The limit that bound its worker when the row's last key to end with an answer ended; absent when none bound
   * (`open`), or none ended so.
   */
  limit?: BindingLimit;
  /**
   * The service itself answered a 429 lately (`CreateImageResult.refused`): the window is cut. Without it, a limit
   * that binds (the worker's pace or quota gate holding rows) holds the window.
   */
  refused?: true;
}

/** What bounds the window now, for the progress line. */
export interface WindowView {
  /** Rows in flight allowed now. */
  size: number;
  ceiling: number;
  /** `rate` or `concurrency` after the service's limit cut it, `ceiling` when it stands at its ceiling. */
  boundBy?: Exclude<BindingLimit, 'open'> | 'ceiling';
}

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
  /**
   * The part of `spentUsd` counted at a price the user gave (`--price`), which the service never showed: at your
   * price, unconfirmed. Absent when none.
   */
  unconfirmedUsd?: number;
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
  /**
   * The limit that binds, as the latest row to end with a key's answer said, if it said so within the last
   * half minute of workflow time (rows from before the report say none).
   */
  limit?: BindingLimit;
  /** How many continue-as-new hops this batch has made. */
  runs: number;
  /** Keys rows tried after their first (each after a refunded failure or a 402), as far as the rows said. */
  newKeys: number;
  /** Prices the batch was given that the service's own charges contradict (it charged more): the cap counts those. */
  pricesSeen?: PriceSeen[];
  /** Where the batch's canary stands; absent for a batch started before canaries. */
  canary?: CanaryPhase;
  /** The adaptive window: rows in flight allowed now, its ceiling, and what bounds it (absent once done). */
  window?: WindowView;
  done: boolean;
}

/** A price per image the batch was given (catalog or `--price`) that creations of the model were charged above. */
export interface PriceSeen {
  model: string;
  /** USD per image, as given. */
  givenUsd: number;
  source: 'catalog' | 'user';
  /** USD per image, the most a creation of the model was charged: what the cap counts from then on. */
  chargedUsd: number;
}

/** What a resume may change (`imagebatch resume`). */
export interface ResumeOptions {
  /** A new spend cap (USD). */
  spendCapUsd?: number;
  /** Prices per image (USD) by model, added to the batch's own (`--price`); the catalog's still come first. */
  prices?: Record<string, number>;
}
