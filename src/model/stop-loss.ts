/**
 * A batch's stop-loss: a canary row first, then breakers that pause the batch when something would repeat. The
 * batch workflow keeps them (src/workflows/stop-loss.ts); these are their options and what a trip says.
 */

/** What paused a batch to stop a loss. */
export const Breaker = {
  /** The first row (the canary) did not end in a state the client fully understood. */
  Canary: 'canary',
  /** Rows in a row ended with the same failure that resubmitting would not change. */
  SameRejection: 'same_rejection',
  /** A large share of the recent rows was declined at generation with a failure not to resubmit (the safety filter). */
  Declined: 'declined',
  /** Rows of unknown outcome (they may hold money) piled up. */
  Unknown: 'unknown',
  /** A creation was charged more per image than the price the spend cap counted. */
  PriceDiffers: 'price_differs',
} as const;
export type Breaker = (typeof Breaker)[keyof typeof Breaker];

/** The stop-loss of a batch, option by option (`imagebatch run --stop-loss name=value,...`). */
export interface StopLossOptions {
  /**
   * Send one row alone first, and start the others only once it ended `succeeded` (its status recognised, its
   * images saved and checked). A row served by an earlier request, or one declined for its content, proves nothing:
   * the next row is the canary then. Skipped when the worker's settings were proven on this store before.
   * @default true
   */
  canary?: boolean;
  /**
   * Canaries that ended `failed` (declined, rejected, refunded past the limit) before the batch pauses.
   * @default 3
   */
  canaryFailures?: number;
  /** Rows in a row ending with the same failure not to resubmit, at which the batch pauses (0: never). @default 5 */
  sameRejection?: number;
  /** The recent rows over which the share declined at generation is counted. @default 20 */
  declinedWindow?: number;
  /** The share of those declined at generation at which the batch pauses (0: never). @default 0.5 */
  declinedShare?: number;
  /** Rows of unknown outcome since the start or the last resume at which the batch pauses (0: never). @default 3 */
  unknownRows?: number;
  /**
   * With a spend cap: pause when a creation was charged more per image than the price the cap counted, by more
   * than this share of it (the cap counts the higher price from then on).
   * @default 0
   */
  priceTolerance?: number;
  /** Breakers switched off. @default none */
  off?: Breaker[];
}

/** The defaults of {@link StopLossOptions}, said once. */
export const STOP_LOSS_DEFAULTS = {
  canary: true,
  canaryFailures: 3,
  sameRejection: 5,
  declinedWindow: 20,
  declinedShare: 0.5,
  unknownRows: 3,
  priceTolerance: 0,
} as const satisfies Required<Omit<StopLossOptions, 'off'>>;

/** Why a batch paused to stop a loss: the breaker, what it saw, and what to do. */
export interface StopLossTrip {
  breaker: Breaker;
  /** What was seen, for a person (a row's error, counts). */
  message: string;
  /** The row that tripped it, when one did. */
  rowId?: string;
}

/** Where a batch's canary stands. */
export const CanaryPhase = {
  /** The next row to start is the canary. */
  Next: 'next',
  /** The canary row is in flight: no other row starts. */
  Running: 'running',
  /** A canary ended `succeeded`: the batch fans out. */
  Passed: 'passed',
  /** The worker's settings were proven before (a canary or doctor's paid test on this store). */
  Proven: 'proven',
  /** Switched off for this batch. */
  Off: 'off',
} as const;
export type CanaryPhase = (typeof CanaryPhase)[keyof typeof CanaryPhase];
