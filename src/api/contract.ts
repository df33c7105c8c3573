/**
 * The published facts of the image service (its interface document, outside this repository) and the defaults we
 * fixed for what it leaves out. Both the client and the simulator take their constants from here,
 * so that a typo cannot make them agree with each other and disagree with the document.
 */

/** Error codes of the error envelope (`error.code`), with their HTTP statuses. */
export const ErrorCode = {
  InvalidRequest: 'ERR_INVALID_REQUEST',
  ContentPolicy: 'ERR_CONTENT_POLICY',
  ApiKeyInvalid: 'ERR_API_KEY_INVALID',
  InsufficientBalance: 'ERR_INSUFFICIENT_BALANCE',
  ModelNotFound: 'ERR_MODEL_NOT_FOUND',
  NotFound: 'ERR_NOT_FOUND',
  RateLimit: 'ERR_RATE_LIMIT',
  QuotaExceeded: 'ERR_QUOTA_EXCEEDED',
  Internal: 'ERR_INTERNAL',
  GenerationFailed: 'ERR_GENERATION_FAILED',
  ProviderUnavailable: 'ERR_PROVIDER_UNAVAILABLE',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export const HTTP_STATUS_OF: Readonly<Record<ErrorCode, number>> = {
  ERR_INVALID_REQUEST: 400,
  ERR_CONTENT_POLICY: 400,
  ERR_API_KEY_INVALID: 401,
  ERR_INSUFFICIENT_BALANCE: 402,
  ERR_MODEL_NOT_FOUND: 404,
  ERR_NOT_FOUND: 404,
  ERR_RATE_LIMIT: 429,
  ERR_QUOTA_EXCEEDED: 429,
  ERR_INTERNAL: 500,
  ERR_GENERATION_FAILED: 502,
  ERR_PROVIDER_UNAVAILABLE: 503,
};

/** `detail` of the plain authentication-failure bodies (not the envelope). */
export const AuthDetail = {
  AuthenticationRequired: 'authentication_required',
  ApiKeyInvalid: 'api_key_invalid',
  AccountDisabled: 'account_disabled',
} as const;
export type AuthDetail = (typeof AuthDetail)[keyof typeof AuthDetail];

/** The four `error` strings of a failed creation, exactly as published (note the em dash in the first). */
export const FailureMessage = {
  SafetyFilter:
    'Prompt rejected by the safety filter. Make the scene more specific \u2014 abstract or generic prompts are declined more often.',
  NoImage: 'Provider returned no image.',
  TimedOut: 'Generation timed out.',
  Failed: 'Generation failed.',
} as const;
export type FailureMessage = (typeof FailureMessage)[keyof typeof FailureMessage];

/** Whether a failed creation's `error` may be submitted again as is. Unknown strings are not retryable. */
export function isRetryableFailureMessage(error: string): boolean {
  return error === FailureMessage.NoImage || error === FailureMessage.TimedOut || error === FailureMessage.Failed;
}

/** The status every naming shares for a failed creation. */
export const FAILED_STATUS = 'failed';

/** Status namings of the simulator: the default, and the second one contract-defaults.md asks for. */
export const StatusNaming = {
  default: { queued: 'queued', running: 'running', succeeded: 'succeeded', failed: FAILED_STATUS },
  alternate: { queued: 'pending', running: 'processing', succeeded: 'completed', failed: FAILED_STATUS },
} as const;
export type StatusNamingName = keyof typeof StatusNaming;

/** The client's default success set: tolerant, since the interface names only `failed`. */
export const DEFAULT_SUCCESS_STATUSES: readonly string[] = ['succeeded', 'completed', 'complete', 'success', 'done'];

/**
 * The client's default set of statuses that say a creation is still in flight: the simulator's two namings and the
 * words common queue APIs use. A status in no set (success, `failed`, in flight) is waited out like these, unless the
 * record holds an image (by its bytes) or something at an image path: then the batch stops and names the word
 * (src/api/unrecognised-status.ts).
 */
export const DEFAULT_PENDING_STATUSES: readonly string[] = [
  'queued',
  'enqueued',
  'in_queue',
  'pending',
  'submitted',
  'created',
  'accepted',
  'scheduled',
  'waiting',
  'starting',
  'started',
  'preparing',
  'initializing',
  'running',
  'processing',
  'in_progress',
  'in-progress',
  'inprogress',
  'generating',
  'rendering',
  'active',
  'working',
  'validating',
  'finalizing',
];

/** Key format: `<prefix>live_<40 characters [A-Za-z0-9]>`; the simulator's prefix is `img_`. */
export const API_KEY_TAIL = /live_[A-Za-z0-9]{40}$/;
export const SIMULATOR_KEY_PREFIX = 'img_';

/** Default header names (both configurable in the client). */
export const DEFAULT_IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const API_KEY_HEADER = 'X-API-Key';

/** The API path prefix inside `{base_url}`. */
export const API_PREFIX = '/api/public/v1';
