import { ErrorCode } from '../api/contract';
import { BATCH_FILE_FAILURE, FailureType } from '../model';

/**
 * The names and label values of imagebatch's own metrics, as Prometheus shows them next to the Temporal
 * runtime's `temporal_*` metrics (docs/scaling.md lists both). Counters have no `_total` suffix, like the runtime's.
 */
export const MetricName = {
  /** Image-service requests by `kind` (submit, poll, models) and `class` ({@link ResponseClass}). */
  ApiRequests: 'imagebatch_api_requests',
  /** HTTP 429 answers by `kind` and `reason` (`rate_limit`, `min_poll_interval`, `concurrency_limit`, ...). */
  TooManyRequests: 'imagebatch_api_429',
  /** Accepted submissions (a 202, new or replayed): creations the account is charged for. */
  Charges: 'imagebatch_charges',
  /** What the accepted submissions cost, in millionths of a USD (counters count whole numbers). */
  ChargedMicroUsd: 'imagebatch_charged_usd_micros',
  /** Refunds the worker learnt of, by `reason` ({@link RefundReason}). */
  Refunds: 'imagebatch_refunds',
  /** Activity attempts that failed and will be retried, by `activity` and `reason` (the failure type). */
  ActivityRetries: 'imagebatch_activity_retries',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

/** How one request to the image service ended (label `class` of {@link MetricName.ApiRequests}). */
export const ResponseClass = {
  Success: '2xx',
  ClientError: '4xx',
  ServerError: '5xx',
  /** Any other HTTP status (1xx, 3xx). */
  Other: 'other',
  /** No usable answer: connection refused or reset, timeout, a body cut short. */
  Transport: 'transport',
  /** Not sent: the worker held the request back because the service had asked the key to wait. */
  LocalHold: 'local_hold',
  /** The attempt ended without an answer to classify (cancelled, worker shut down, a bug): sent or not. */
  Unclassified: 'unclassified',
} as const;
export type ResponseClass = (typeof ResponseClass)[keyof typeof ResponseClass];

/** Why a charge came back (label `reason` of {@link MetricName.Refunds}). */
export const RefundReason = {
  /** A submission answered 502 ERR_GENERATION_FAILED or 503 ERR_PROVIDER_UNAVAILABLE: charged and refunded. */
  RefusedSubmission: 'refused_submission',
  /** An accepted creation ended `failed` (safety filter, no image, timed out...): refunded automatically. */
  FailedCreation: 'failed_creation',
} as const;
export type RefundReason = (typeof RefundReason)[keyof typeof RefundReason];

/** The response class of an HTTP status. */
export function responseClassOf(status: number): ResponseClass {
  if (status >= 200 && status < 300) return ResponseClass.Success;
  if (status >= 400 && status < 500) return ResponseClass.ClientError;
  if (status >= 500 && status < 600) return ResponseClass.ServerError;
  return ResponseClass.Other;
}

/** The label value of anything outside a label's fixed set. */
export const OTHER_LABEL = 'other';

/**
 * The values of label `reason` of {@link MetricName.TooManyRequests}: the documented `details.reason`s
 * (service-interface.md, contract-defaults.md), the two 429 codes (the label when a 429 gives no reason) and `unknown` (neither).
 * Anything else the service says is {@link OTHER_LABEL}: a label value never comes from the service as it is, or a
 * hostile service could make one series per answer.
 */
export const TOO_MANY_REQUESTS_REASONS: readonly string[] = [
  'rate_limit',
  'min_poll_interval',
  'concurrency_limit',
  'capacity',
  'monthly_budget_exceeded',
  ErrorCode.RateLimit,
  ErrorCode.QuotaExceeded,
  'unknown',
];

/** The `reason` label of a 429: one of {@link TOO_MANY_REQUESTS_REASONS}, else `other`. */
export function tooManyRequestsLabel(reason: string): string {
  return TOO_MANY_REQUESTS_REASONS.includes(reason) ? reason : OTHER_LABEL;
}

/** Names of errors a retried attempt may end with besides the failure types: JavaScript's own. */
const ERROR_NAMES: readonly string[] = [
  'Error',
  'TypeError',
  'RangeError',
  'SyntaxError',
  'ReferenceError',
  'EvalError',
  'URIError',
  'AggregateError',
  'AbortError',
  'TimeoutError',
];

/**
 * The `reason` label of {@link MetricName.ActivityRetries}: a failure type of the image API, the batch file's, or
 * a JavaScript error name; anything else (an error named by a dependency, or by text from elsewhere) is `other`.
 */
export function retryReasonLabel(reason: string): string {
  return (Object.values(FailureType) as string[]).includes(reason) ||
    reason === BATCH_FILE_FAILURE ||
    ERROR_NAMES.includes(reason)
    ? reason
    : OTHER_LABEL;
}
