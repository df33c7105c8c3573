import type { PollCreationResult, SubmitCreationResult } from '../model';
import type { FailureOutcome } from './classify';
import type { ClientOutcome } from './client';

/**
 * What each answer to a submission or a poll means, for both of their senders: `createImage` (one request per
 * activity attempt; its waits are Temporal retries) and doctor's paid test (one loop that waits in place). Each
 * sender decides how it waits and what it tells; the meaning of an answer is decided here, once.
 */

type OutcomeOf<K extends ClientOutcome['kind']> = Extract<ClientOutcome, { kind: K }>;

/** What an answer to a submission (a POST with its idempotency key) says of the key. */
export type SubmitStep =
  /** The service accepted the key: a creation exists, and it was charged. */
  | { kind: 'accepted'; accepted: SubmitCreationResult }
  /** Told to wait (a 429, a 503's Retry-After, this worker's own hold): nothing was stored; the same key later. */
  | { kind: 'held'; outcome: OutcomeOf<'rateLimited'> }
  /**
   * No answer that can be read: the same key again after a backoff, counted against `IMAGEGEN_MAX_AMBIGUOUS_TRIES`.
   * `sent` is false when the request never left (nothing can have been charged by it); `failure` is what a retry
   * reports meanwhile.
   */
  | { kind: 'unclear'; lastError: string; sent: boolean; failure: FailureOutcome }
  /** An answer that ends the key: refunded, rejected, a stop of the batch, the worker's own configuration. */
  | { kind: 'ends'; outcome: OutcomeOf<'refunded' | 'rejected' | 'batchStop' | 'config'> }
  /** An answer no submission gets (a record, a catalog, a 404 of a creation): its outcome is not known. */
  | { kind: 'unexpected'; lastError: string };

/** The {@link SubmitStep} of one answer to a submission. */
export function submitStep(outcome: ClientOutcome): SubmitStep {
  switch (outcome.kind) {
    case 'accepted':
      return {
        kind: 'accepted',
        accepted: {
          creationId: outcome.creationId,
          status: outcome.status,
          ...(outcome.costUsd === undefined ? {} : { costUsd: outcome.costUsd }),
          ...(outcome.replayed === undefined ? {} : { replayed: outcome.replayed }),
        },
      };
    case 'rateLimited':
      return { kind: 'held', outcome };
    case 'ambiguous':
      return { kind: 'unclear', lastError: outcome.lastError, sent: true, failure: outcome };
    case 'notSent':
      return { kind: 'unclear', lastError: outcome.lastError, sent: false, failure: outcome };
    case 'malformed':
      return {
        kind: 'unclear',
        lastError: outcome.lastError,
        sent: true,
        failure: { kind: 'ambiguous', lastError: outcome.lastError },
      };
    case 'refunded':
    case 'rejected':
    case 'batchStop':
    case 'config':
      return { kind: 'ends', outcome };
    case 'ended':
    case 'inFlight':
    case 'models':
    case 'notFound':
      return { kind: 'unexpected', lastError: `unexpected ${outcome.kind} answer to a submission` };
  }
}

/** What an answer to a poll (a GET of a creation) says of it. */
export type PollStep =
  /** The creation ended: succeeded (its images listed) or failed. */
  | { kind: 'ended'; result: PollCreationResult }
  /** Still in flight: polled again, no sooner than the poll interval. */
  | { kind: 'inFlight'; outcome: OutcomeOf<'inFlight'> }
  /** Told to wait: polled again after its Retry-After. */
  | { kind: 'held'; outcome: OutcomeOf<'rateLimited'> }
  /** No answer that can be read (a 500, a timeout, a send that never left, a record not understood): counted. */
  | { kind: 'unclear'; outcome: OutcomeOf<'ambiguous' | 'notSent' | 'malformed'> }
  /** An answer that ends the polling: the creation is not found, a stop of the batch, a refusal, the configuration. */
  | { kind: 'ends'; outcome: OutcomeOf<'notFound' | 'batchStop' | 'config' | 'refunded' | 'rejected'> }
  /** An answer no poll gets (an acceptance, a catalog). */
  | { kind: 'unexpected'; lastError: string };

/** The {@link PollStep} of one answer to a poll. */
export function pollStep(outcome: ClientOutcome): PollStep {
  switch (outcome.kind) {
    case 'ended':
      return { kind: 'ended', result: outcome.result };
    case 'inFlight':
      return { kind: 'inFlight', outcome };
    case 'rateLimited':
      return { kind: 'held', outcome };
    case 'ambiguous':
    case 'notSent':
    case 'malformed':
      return { kind: 'unclear', outcome };
    case 'notFound':
    case 'batchStop':
    case 'config':
    case 'refunded':
    case 'rejected':
      return { kind: 'ends', outcome };
    case 'accepted':
    case 'models':
      return { kind: 'unexpected', lastError: `unexpected ${outcome.kind} answer to a poll` };
  }
}

/**
 * The longest wait before the n-th try (from 1) after an answer that could not be read: the base doubled each time,
 * up to the maximum (`IMAGEGEN_BACKOFF_BASE_MS`, `IMAGEGEN_BACKOFF_MAX_MS`).
 */
export function backoffCeilingMs(n: number, config: { backoffBaseMs: number; backoffMaxMs: number }): number {
  return Math.min(config.backoffMaxMs, config.backoffBaseMs * 2 ** Math.min(Math.max(n - 1, 0), 30));
}
