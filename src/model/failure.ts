/**
 * The `type` of every `ApplicationFailure` an image-service activity throws. Workflows branch on these
 * strings (never on messages); `src/api/classify.ts` maps each response of the interface to exactly one outcome,
 * and `src/activities/failures.ts` turns that outcome into a failure of one of these types.
 */
export const FailureType = {
  /**
   * 429 (rate limit, poll interval, quota) or a process-wide hold on the key: retry the same request with the
   * same idempotency key after `nextRetryDelay`. Retryable; the activity's own retry does the waiting.
   */
  RateLimited: 'ImageApi.RateLimited',
  /**
   * No response, timeout, connection reset, 500: the request may have been charged. Retry with the same key,
   * with backoff. Retryable, a bounded number of times; then {@link FailureType.Unknown}.
   */
  Ambiguous: 'ImageApi.Ambiguous',
  /**
   * The service could not be reached and no byte of the request left (connection refused, a failed name lookup, the
   * connect timeout, a TLS handshake): nothing was charged. Retry the same key after `nextRetryDelay`, as an outage.
   * Retryable, a bounded number of times; then {@link FailureType.NotSent}.
   */
  Unreachable: 'ImageApi.Unreachable',
  /**
   * Every send of the key failed before any of it left (see {@link FailureType.Unreachable}) until the bounded retries
   * ran out: the key is `not_sent`, charged nothing. Non-retryable: the row ends failed, safe to submit again.
   */
  NotSent: 'ImageApi.NotSent',
  /**
   * The outcome of a submission stayed unknown after the bounded retries (e.g. a key that keeps answering 500).
   * Non-retryable: the row ends as `unknown` with its key, for reconciliation; it may have been charged.
   */
  Unknown: 'ImageApi.Unknown',
  /**
   * A refunded failure of the submission: 502, or 503 (wait its Retry-After first, given in details). The
   * attempt is over; the next one is a new attempt with a new key. Non-retryable for the activity.
   */
  Refunded: 'ImageApi.Refunded',
  /**
   * Final for this row: 400 with its field errors, 404 model not found. Non-retryable.
   */
  Rejected: 'ImageApi.Rejected',
  /**
   * Stop the whole batch until a person acts: 401/403 authentication failures, 402 insufficient balance or
   * monthly budget. Details keep what the service said (required amount, top-up URL, cap). Non-retryable.
   */
  BatchStop: 'ImageApi.BatchStop',
  /** The creation is still in flight: poll again after `nextRetryDelay`. Retryable. */
  Pending: 'ImageApi.Pending',
  /** GET /creations/{id} answered 404: the id is unknown to this account. Non-retryable. */
  CreationNotFound: 'ImageApi.CreationNotFound',
  /** A response that matches no documented shape (a bug or a proxy in the way). Retryable with backoff. */
  Malformed: 'ImageApi.Malformed',
  /** Local configuration is wrong (e.g. the API key's format): nothing can succeed until it is fixed. */
  Config: 'ImageApi.Config',
  /**
   * An image could not be downloaded (details: {@link DownloadFailedDetails}). Retryable for transport errors,
   * 429 and 5xx (then `nextRetryDelay` may carry Retry-After); non-retryable for other statuses, a body over
   * the size limit, or a content type that is not an image.
   */
  DownloadFailed: 'ImageApi.DownloadFailed',
  /**
   * The creation was accepted (and paid) but had not ended when the row's maximum wait for it ran out. It may still
   * end at the service. Non-retryable.
   */
  MaxWait: 'ImageApi.MaxWait',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Why a batch must stop until a person acts (details of {@link FailureType.BatchStop}). */
export const BatchStopReason = {
  AuthenticationRequired: 'authentication_required',
  ApiKeyInvalid: 'api_key_invalid',
  AccountDisabled: 'account_disabled',
  InsufficientBalance: 'insufficient_balance',
  MonthlyBudgetExceeded: 'monthly_budget_exceeded',
  /** Polls kept being answered 404 without the service's ERR_NOT_FOUND code: the creation path is likely wrong. */
  CreationPathNotFound: 'creation_path_not_found',
  /** The worker's own configuration refused the request before sending it (e.g. the key's format). */
  WorkerConfig: 'worker_config',
  /**
   * A creation succeeded and was paid, and its images were refused here for a reason that would refuse the next
   * row's too (no image found in the record, a type refused, a URL the download guard refuses): the row keeps its
   * creation, and after the setting is changed `resume` fetches it again.
   */
  ImagesRefused: 'images_refused',
  /**
   * A poll's status is in none of the worker's sets (success, failed, in flight) and its record holds an image, judged
   * by its bytes (the status likely means success under another word), or something at a configured image path. The
   * message names the word and the setting to change.
   */
  UnrecognisedStatus: 'unrecognised_status',
  /**
   * A creation not found for a whole window of reads that lag writes, and its key sent again made a new creation: the
   * service did not keep the key, so every retry may pay twice. The row's creation is lost.
   */
  KeyNotKept: 'key_not_kept',
} as const;
export type BatchStopReason = (typeof BatchStopReason)[keyof typeof BatchStopReason];

/** The first element of `ApplicationFailure.details` for {@link FailureType.BatchStop}. */
export interface BatchStopDetails {
  reason: BatchStopReason;
  httpStatus: number;
  /** The service's message, verbatim (never contains the key). */
  message: string;
  /** 402: the USD amount the request needed. */
  requiredUsd?: number;
  /** 402: the wallet balance, when the service says it. */
  balanceUsd?: number;
  /** 402: where to top up. */
  topUpUrl?: string;
  /** 402 monthly budget: the cap. */
  monthlyCapUsd?: number;
}

/** The first element of `ApplicationFailure.details` for {@link FailureType.Rejected}. */
export interface RejectedDetails {
  httpStatus: number;
  code: string;
  message: string;
  /** 400: every field problem the service listed. */
  fieldErrors: { field: string; message: string }[];
}

/** The first element of `ApplicationFailure.details` for {@link FailureType.Refunded}. */
export interface RefundedDetails {
  httpStatus: number;
  code: string;
  message: string;
  /** 503: how long to wait before the next attempt (from Retry-After). */
  retryAfterMs?: number;
}

/** The first element of `ApplicationFailure.details` for {@link FailureType.Unknown}. */
export interface UnknownDetails {
  idempotencyKey: string;
  tries: number;
  lastError: string;
}

/** The first element of `ApplicationFailure.details` for {@link FailureType.NotSent}. */
export interface NotSentDetails {
  idempotencyKey: string;
  /** Sends tried, none of which left. */
  tries: number;
  lastError: string;
}

/** The first element of `ApplicationFailure.details` for {@link FailureType.DownloadFailed}. */
export interface DownloadFailedDetails {
  url: string;
  /** Index of the image in the creation. */
  index: number;
  reason: string;
  httpStatus?: number;
  /** Refused for its size (`IMAGEGEN_MAX_DOWNLOAD_BYTES`, the creation's budget): another row's image may fit. */
  tooLarge?: true;
}

/**
 * The failure types that end a key at once: the activity never retries them (they are `nonRetryable`, and the
 * retry policy of `createImage` lists them too, as a second guard), and the row and reconcile workflows branch on
 * each (and on a non-retryable {@link FailureType.DownloadFailed}, which is retryable at times and so not listed).
 * The one list of them.
 */
export const KEY_ENDING_FAILURES = [
  FailureType.Unknown,
  FailureType.Refunded,
  FailureType.Rejected,
  FailureType.BatchStop,
  FailureType.CreationNotFound,
  FailureType.MaxWait,
  FailureType.Config,
  // Added later: at the end, so the list running workflows recorded is unchanged before it.
  FailureType.NotSent,
] as const satisfies readonly FailureType[];
export type KeyEndingFailure = (typeof KEY_ENDING_FAILURES)[number];

/** Whether a failure type ends a key at once (one of {@link KEY_ENDING_FAILURES}). */
export function endsKey(type: string | undefined | null): type is KeyEndingFailure {
  return (KEY_ENDING_FAILURES as readonly string[]).includes(type ?? '');
}

/**
 * The failure types a workflow branches on when `createImage` fails: those that end a key, and a failed download
 * (which ends it once it is no longer retried). Any other type reaching a workflow is a bug, thrown on.
 */
export type HandledFailure = KeyEndingFailure | typeof FailureType.DownloadFailed;

/** The failure type as one a workflow branches on ({@link HandledFailure}); undefined for any other. */
export function handledFailure(type: string | undefined | null): HandledFailure | undefined {
  return endsKey(type) || type === FailureType.DownloadFailed ? type : undefined;
}
