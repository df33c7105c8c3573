import type {
  BatchStopDetails,
  ModelInfo,
  NotSentDetails,
  PollCreationResult,
  RefundedDetails,
  RejectedDetails,
  UnknownDetails,
} from '../model';
import type { UnjudgedRecord } from './unrecognised-status';

/**
 * What an answer of the image service means: the typed {@link Outcome} that `classifyResponse` (classify.ts) makes of
 * each response, once. Plain data: only the activities turn a failing one into an `ApplicationFailure`.
 */

/** Which request was answered. */
export const RequestKind = {
  /** POST {base_url}/creations: charged; the idempotency key decides what a retry may do. */
  Submit: 'submit',
  /** GET {base_url}/creations/{id}: free. */
  Poll: 'poll',
  /** GET {base_url}/models: free. */
  Models: 'models',
} as const;
export type RequestKind = (typeof RequestKind)[keyof typeof RequestKind];

export interface RateLimitedInfo {
  httpStatus: number;
  code: string;
  message: string;
  retryAfterMs: number;
  /** ERR_QUOTA_EXCEEDED: which limit. */
  scope?: string;
  reason?: string;
  /** True when the client held the request back itself (nothing was sent). */
  local?: boolean;
  /** True when the request probed above the worker's learnt pace or quota: its 429 is not news (client.ts). */
  probe?: boolean;
}

/** Every meaning a response can have. */
export type Outcome =
  /** Submit: 202 (new or replayed). */
  | { kind: 'accepted'; creationId: string; status: string; costUsd?: number; replayed?: boolean }
  /** Poll: the creation has ended. */
  | { kind: 'ended'; result: PollCreationResult }
  /**
   * Poll: the creation is still in flight; `retryAfterMs`, the answer's Retry-After: no poll of it sooner.
   * `unrecognised`: its status is in no set, and its record holds URLs to judge by their bytes, or something at an
   * image path (unrecognised-status.ts).
   */
  | { kind: 'inFlight'; status: string; retryAfterMs?: number; unrecognised?: UnjudgedRecord }
  /** Models: the catalog. */
  | { kind: 'models'; models: ModelInfo[] }
  /** 429, or 503 on a free request, or a local hold: the same request again after `retryAfterMs`. */
  | ({ kind: 'rateLimited' } & RateLimitedInfo)
  /**
   * No response, and none of the request left (connection refused, a failed name lookup, the connect timeout, a TLS
   * handshake): not seen by the service, so not charged. The same request again later, as an outage.
   */
  | { kind: 'notSent'; lastError: string }
  /** No response, timeout, reset, 500, an unreadable 2xx to a submission, a poll's 404 without ERR_NOT_FOUND: not known. */
  | {
      kind: 'ambiguous';
      httpStatus?: number;
      lastError: string;
      retryAfterMs?: number;
      /** A 404 without the service's ERR_NOT_FOUND code: a proxy's page or a wrong IMAGEGEN_CREATION_PATH; the activity counts a run of them. */
      unrecognizedNotFound?: true;
    }
  /** 502 ERR_GENERATION_FAILED, 503 ERR_PROVIDER_UNAVAILABLE on a submission: refunded; a new attempt. */
  | { kind: 'refunded'; details: RefundedDetails }
  /** 400, 404 on a submission: final for the row. */
  | { kind: 'rejected'; details: RejectedDetails }
  /** 401, 403, 402: stop the batch. */
  | { kind: 'batchStop'; details: BatchStopDetails }
  /** Poll: 404 with the service's ERR_NOT_FOUND code: the creation is lost. */
  | { kind: 'notFound'; httpStatus: number; code: string; message: string }
  /** A free request answered with something no documented shape matches. */
  | { kind: 'malformed'; httpStatus?: number; lastError: string };

/** Outcomes that are failures, plus the two the activities decide themselves. */
export type FailureOutcome =
  | Exclude<Outcome, { kind: 'accepted' } | { kind: 'ended' } | { kind: 'models' }>
  | { kind: 'unknown'; details: UnknownDetails }
  | { kind: 'keyNotSent'; details: NotSentDetails }
  | { kind: 'config'; message: string };
