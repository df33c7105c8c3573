/**
 * Whether the service honours the idempotency key: a batch's canary, and doctor's paid test, send their key a second
 * time once the first answer is known; the same creation must come back. A service that ignores the key (it reads it
 * elsewhere, or not at all) makes, and charges, a second creation: every retry of a batch would pay twice.
 */

/** What the second send of a key showed. */
export const KeyCheckResult = {
  /** The same creation came back: a retry of the key pays nothing again. */
  Honoured: 'honoured',
  /** The service judged the key anew (a second creation, a refund, a 402): it does not honour it. */
  NotHonoured: 'not_honoured',
  /** No answer that could be read, or one that proves nothing: the key could not be proven. */
  Unclear: 'unclear',
} as const;
export type KeyCheckResult = (typeof KeyCheckResult)[keyof typeof KeyCheckResult];

/** The check of one key, as the activity that made it says it (it knows the settings). */
export interface KeyCheck {
  result: KeyCheckResult;
  /** Where the key travelled, in words: `header Idempotency-Key`, `body field metadata.key`. */
  carrier: string;
  /** What the check showed, for a person: one sentence naming the carrier. */
  message: string;
  /** What to do, when the key was not proven honoured. */
  advice?: string;
  /** The second creation the service made for the key (charged): it did not honour it. */
  duplicate?: { creationId: string; costUsd?: number };
}

/**
 * The ledger store's id of a second creation the service made for `idempotencyKey` (a check of the key, or its replay
 * after its creation was not found): `<key>#<creation>`. Never sent: a creation, not a key.
 */
export function duplicateKeyOf(idempotencyKey: string, creationId: string): string {
  return `${idempotencyKey}#${creationId}`;
}

/** Whether a key of the store is a second creation made for `idempotencyKey` ({@link duplicateKeyOf}). */
export function isDuplicateOf(storeKey: string, idempotencyKey: string): boolean {
  return storeKey.startsWith(`${idempotencyKey}#`);
}
