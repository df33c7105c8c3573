import { ApplicationFailure } from '@temporalio/common';
import {
  duplicateKeyOf,
  FailureType,
  handledFailure,
  KeyOutcome,
  type CreateImageInput,
  type CreateImageResult,
  type KeyProgress,
  type SubmitCreationResult,
} from '../../model';
import { keyMayBeStoredSince } from '../../ledger';
import { toApplicationFailure } from '../failures';
import { asRecord } from '../../api/outcome-text';
import { keyIds, type KeyLedger } from './ledger-consult';

/** What each answer of the service writes of a key in the ledger store (what is asked first: ledger-consult.ts). */

/**
 * What a submission's failed answer says of the key: stored nothing (429, 401, 403, a local hold, the worker's own
 * configuration, a send that never left), or maybe stored (no answer that can be read). An answer that ends the key
 * is {@link recordEnd}'s. Returns the failure to throw: a key that ends `not_sent` here, but that an earlier send
 * (another run) may have reached, ends unknown instead.
 */
export async function noteAnswer(keys: KeyLedger, input: CreateImageInput, err: unknown): Promise<unknown> {
  if (!(err instanceof ApplicationFailure)) return err;
  const status = asRecord(err.details?.[0]).httpStatus;
  const notSent = err.type === FailureType.Unreachable || err.type === FailureType.NotSent;
  const unseen =
    notSent ||
    err.type === FailureType.RateLimited ||
    err.type === FailureType.Config ||
    (err.type === FailureType.BatchStop && status !== 402);
  const ambiguous = !err.nonRetryable && (err.type === FailureType.Ambiguous || err.type === FailureType.Malformed);
  if (unseen || ambiguous) {
    await keys.store.append([{ type: unseen ? 'unseen' : 'ambiguous', ...keyIds(input) }], keys.now());
  }
  if (err.type !== FailureType.NotSent) return err;
  const known = await keys.store.key(input.idempotencyKey);
  if (!known || (known.creationId === undefined && keyMayBeStoredSince(known) === undefined)) return err;
  const details = asRecord(err.details?.[0]);
  return toApplicationFailure({
    kind: 'unknown',
    details: {
      idempotencyKey: input.idempotencyKey,
      tries: typeof details.tries === 'number' && details.tries > 0 ? details.tries : 1,
      lastError: `${typeof details.lastError === 'string' ? details.lastError : err.message}; an earlier send of the key may have reached the service`,
    },
  });
}

/** The service accepted the key: a creation exists, and it was charged. */
export async function accepted(keys: KeyLedger, input: CreateImageInput, result: SubmitCreationResult): Promise<void> {
  const cost = result.costUsd === undefined ? {} : { costUsd: result.costUsd };
  await keys.store.append([{ type: 'accepted', ...keyIds(input), creationId: result.creationId, ...cost }], keys.now());
}

/**
 * A second creation the service made for the key sent again (to prove it, or after its creation was not found): it did
 * not honour or keep the key. Charged, and never polled. Written as an entry of its own (`<key>#<creation>`, the same request), ended `duplicate`, so spend
 * reports and budgets count it and a later request of the same fingerprint may follow it, never waiting on it.
 */
export async function duplicateCreation(
  keys: KeyLedger,
  input: CreateImageInput,
  outDir: string,
  duplicate: { creationId: string; costUsd?: number },
  error: string,
): Promise<void> {
  const { creationId } = duplicate;
  const idempotencyKey = duplicateKeyOf(input.idempotencyKey, creationId);
  const ids = { batchId: input.batchId, rowId: input.rowId, idempotencyKey };
  const cost = duplicate.costUsd === undefined ? {} : { costUsd: duplicate.costUsd };
  await keys.store.append(
    [
      { type: 'sending', ...ids, request: input.request, ...keys.fingerprintOf(input.request), outDir },
      { type: 'accepted', ...ids, creationId, ...cost },
      { type: 'ended', ...ids, outcome: KeyOutcome.Duplicate, creationId, ...cost, error },
    ],
    keys.now(),
  );
}

/** The key's end, when its creation ended. */
export async function ended(keys: KeyLedger, input: CreateImageInput, result: CreateImageResult): Promise<void> {
  if (result.outcome === 'reused') return; // nothing was sent for the key
  const cost = result.costUsd === undefined ? {} : { costUsd: result.costUsd };
  await keys.store.append(
    [
      result.outcome === 'succeeded'
        ? {
            type: 'ended',
            ...keyIds(input),
            outcome: KeyOutcome.Succeeded,
            creationId: result.creationId,
            ...cost,
            images: result.images,
          }
        : {
            type: 'ended',
            ...keyIds(input),
            outcome: KeyOutcome.Failed,
            creationId: result.creationId,
            ...cost,
            error: result.error,
            retryable: result.retryable,
          },
    ],
    keys.now(),
  );
}

/** A failure that ends the key (one that is tried again, or a batch stop, ends nothing). */
export async function recordEnd(
  keys: KeyLedger,
  input: CreateImageInput,
  err: unknown,
  known: KeyProgress,
): Promise<void> {
  if (!(err instanceof ApplicationFailure) || !err.nonRetryable) return;
  // Answered or refused by the store itself (a refusal is an Unknown of 0 tries): nothing new to write.
  const first = asRecord(err.details?.[0]);
  if (first.code === 'LEDGER' || (err.type === FailureType.Unknown && first.tries === 0)) return;
  const outcome = keyOutcomeOfFailure(err, known);
  if (!outcome) return;
  await keys.store
    .append(
      [
        {
          type: 'ended',
          ...keyIds(input),
          outcome,
          ...(known.creationId ? { creationId: known.creationId } : {}),
          ...(known.costUsd === undefined ? {} : { costUsd: known.costUsd }),
          error: err.message,
        },
      ],
      keys.now(),
    )
    .catch(() => undefined); // the failure itself matters more; the key's sending is in the store
}

/** The key outcome a non-retryable failure of createImage stands for, if it ends the key. */
function keyOutcomeOfFailure(err: ApplicationFailure, known: KeyProgress): KeyOutcome | undefined {
  switch (handledFailure(err.type)) {
    case FailureType.Refunded:
      return KeyOutcome.Refunded;
    case FailureType.Rejected:
      return KeyOutcome.Rejected;
    case FailureType.Unknown:
      return known.creationId ? undefined : KeyOutcome.Unknown;
    case FailureType.NotSent:
      return known.creationId ? undefined : KeyOutcome.NotSent;
    case FailureType.CreationNotFound:
      return KeyOutcome.Lost;
    case FailureType.MaxWait:
      return KeyOutcome.TimedOut;
    case FailureType.DownloadFailed:
      return KeyOutcome.Succeeded; // generated, images not saved: no images listed
    case FailureType.BatchStop:
      return asRecord(err.details?.[0]).httpStatus === 402 && !known.creationId ? KeyOutcome.Declined : undefined;
    case FailureType.Config:
    case undefined:
      return undefined;
  }
}
