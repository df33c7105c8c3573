import type { Outcome } from './classify';

/** Why a request was held back in this process, never sent (the `code` of its outcome). */
export const LocalHoldCode = {
  /** A wait the service asked for (Retry-After) has not passed. */
  Wait: 'LOCAL_HOLD',
  /** The key's pace (IMAGEGEN_CLIENT_RATE_PER_SEC, or learnt from 429s) has no request free yet. */
  Rate: 'LOCAL_RATE',
  /** The account's quota, learnt from 429s, is full with this process's creations. */
  Quota: 'LOCAL_QUOTA',
} as const;
export type LocalHoldCode = (typeof LocalHoldCode)[keyof typeof LocalHoldCode];

const LOCAL_HOLD_TEXT: Readonly<Record<LocalHoldCode, string>> = {
  LOCAL_HOLD: 'held back locally until the wait the service asked for has passed',
  LOCAL_RATE: "held back locally: the key's request rate has no room yet",
  LOCAL_QUOTA: "held back locally: the account's creations in flight fill its quota",
};

/** How long a submission held by a full quota waits before it looks again (a poll may free a place sooner). */
export const QUOTA_RECHECK_MS = 1_000;

export function localHold(waitMs: number, code: LocalHoldCode = LocalHoldCode.Wait): Outcome {
  return {
    kind: 'rateLimited',
    httpStatus: 0,
    code,
    message: LOCAL_HOLD_TEXT[code],
    retryAfterMs: waitMs,
    local: true,
  };
}
