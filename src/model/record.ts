/**
 * What is known of a row and its keys: how each key ended, what it cost, and the row's complete record. The row
 * workflow writes it (src/workflows/row-record.ts); the ledger, results and reconcile read it.
 */
import type { DownloadedImage, PriceSource, ReusedFrom } from './creation';
import type { KeyCheck } from './key-check';

/** Final state of a row. Every row ends in exactly one, with its {@link RowRecord}. */
export const RowState = {
  /** Generated, and every image saved. */
  Succeeded: 'succeeded',
  /**
   * Asked and paid before: an earlier request with the same fingerprint (another batch, file or run) served it, so
   * nothing was sent and nothing charged here; its images are copied (or fetched again from the creation) here.
   */
  Reused: 'reused',
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
  /**
   * No send of the key ever left (connection refused, a failed name lookup, the connect timeout, a TLS handshake):
   * the service never saw it, so nothing was charged.
   */
  NotSent: 'not_sent',
  /** No answer was ever known (no response, timeout, 500, cancelled or terminated in flight): may have been charged. */
  Unknown: 'unknown',
  /** Accepted, then the service said the creation does not exist: charged, outcome unknown. */
  Lost: 'lost',
  /** Accepted, still in flight when the row's maximum wait ended: charged; it may still end at the service. */
  TimedOut: 'timed_out',
  /**
   * A second creation the service made when the key was sent again to prove it (the canary's check): the service did
   * not honour the key. Charged, never polled; its own entry, beside the key's.
   */
  Duplicate: 'duplicate',
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
  /** Polls of its creation answered 404 ERR_NOT_FOUND while the service's reads lagged its writes. @default 0 */
  notFoundPolls?: number;
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
  /** The earlier request that served the row (state `reused`, or a row that waited for it and reports it). */
  reusedFrom?: ReusedFrom;
  /** Whether the service honoured the key sent a second time (a canary that proves the key). @default no check */
  keyCheck?: KeyCheck;
}

/** Key outcomes that leave no money held: the key was judged and refused, or charged and refunded in full. */
export const NO_MONEY_HELD: ReadonlySet<KeyOutcome> = new Set([
  KeyOutcome.Failed,
  KeyOutcome.Refunded,
  KeyOutcome.Rejected,
  KeyOutcome.Declined,
  KeyOutcome.NotSent,
]);

/**
 * Whether a row's record leaves money unresolved: its outcome is unknown, its images were not saved, or a key of it
 * may hold money without a creation that succeeded (a cancelled row whose key was in flight). `reconcile` works on
 * these rows, and only these.
 */
export function needsReconcile(record: RowRecord): boolean {
  if (record.state === RowState.Succeeded || record.state === RowState.Reused) return false;
  // Served by another batch's key, with none of its own that may hold money: that batch's reconcile resolves it.
  if (record.reusedFrom && record.keys.every((k) => NO_MONEY_HELD.has(k.outcome))) return false;
  if (record.state === RowState.Unknown || record.state === RowState.ImagesUnsaved) return true;
  return record.keys.some((k) => !NO_MONEY_HELD.has(k.outcome));
}

/** Key outcomes that were charged up front and refunded in full. */
export const REFUNDED_IN_FULL: ReadonlySet<KeyOutcome> = new Set([KeyOutcome.Failed, KeyOutcome.Refunded]);
/** Key outcomes that were charged and hold the charge (accepted, whatever became of the creation). */
export const HOLDS_CHARGE: ReadonlySet<KeyOutcome> = new Set([
  KeyOutcome.Accepted,
  KeyOutcome.Succeeded,
  KeyOutcome.Lost,
  KeyOutcome.TimedOut,
  KeyOutcome.Duplicate,
]);

/** Money of a key or a row (USD); `null` is unknown. */
export interface Money {
  chargedUsd: number | null;
  refundedUsd: number | null;
  netUsd: number | null;
}

/**
 * What a key's outcome says of its money. Refused keys and keys never sent cost nothing; a refunded key gave back all it was charged (net
 * 0, even when its price is unknown); an accepted key holds its charge; a key whose outcome is unknown may hold
 * money or not: unknown.
 */
export function keyMoney(key: Pick<KeyRecord, 'outcome' | 'chargedUsd'>): Money {
  const charged = key.chargedUsd ?? null;
  if (
    key.outcome === KeyOutcome.Rejected ||
    key.outcome === KeyOutcome.Declined ||
    key.outcome === KeyOutcome.NotSent
  ) {
    return { chargedUsd: 0, refundedUsd: 0, netUsd: 0 };
  }
  if (REFUNDED_IN_FULL.has(key.outcome)) return { chargedUsd: charged, refundedUsd: charged, netUsd: 0 };
  if (HOLDS_CHARGE.has(key.outcome)) return { chargedUsd: charged, refundedUsd: 0, netUsd: charged };
  return { chargedUsd: null, refundedUsd: null, netUsd: null };
}

/** A row's money: the sum of its keys', unknown as soon as one key's is. */
export function rowMoney(keys: readonly Pick<KeyRecord, 'outcome' | 'chargedUsd'>[]): Money {
  const sum = (pick: (m: Money) => number | null): number | null => {
    let total = 0;
    for (const key of keys) {
      const v = pick(keyMoney(key));
      if (v === null) return null;
      total += v;
    }
    return roundUsd(total);
  };
  return { chargedUsd: sum((m) => m.chargedUsd), refundedUsd: sum((m) => m.refundedUsd), netUsd: sum((m) => m.netUsd) };
}

/** Rounds a USD figure to a millionth, the precision every figure is kept and compared at. */
export function roundUsd(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
