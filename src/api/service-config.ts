import type { RequestFields } from './request-shape';

/**
 * The type of the image-service client's configuration. Every choice that docs/contract-defaults.md calls a default can be overridden
 * from the environment; `loadServiceConfig` (src/config/service-config.ts) reads and validates all of it at start-up
 * and names the variable at fault. The API key is not part of this object (see `src/api/api-key.ts`): configuration
 * may be logged, the key never.
 */

/** How the API key is sent. */
export const AuthHeaderStyle = {
  /** `Authorization: Bearer <key>` (the service's preferred form). */
  Bearer: 'bearer',
  /** `X-API-Key: <key>`. */
  XApiKey: 'x-api-key',
} as const;
export type AuthHeaderStyle = (typeof AuthHeaderStyle)[keyof typeof AuthHeaderStyle];

/** How creations are polled (`IMAGEGEN_POLL_PLAN`): timed from learnt generation times, or at the interval. */
export const POLL_PLAN_MODES = ['learn', 'interval'] as const;
export type PollPlanMode = (typeof POLL_PLAN_MODES)[number];

export interface ServiceConfig {
  /**
   * `{base_url}`: the service address up to and including the version segment, without a trailing slash.
   * `IMAGEGEN_BASE_URL`.
   * @default 'http://127.0.0.1:8787/api/public/v1'
   */
  baseUrl: string;
  /**
   * Path of the submit endpoint under `{base_url}`. `IMAGEGEN_SUBMIT_PATH`.
   * @default '/creations'
   */
  submitPath: string;
  /**
   * Path of a creation under `{base_url}`; `{id}` is replaced by the URL-encoded id. `IMAGEGEN_CREATION_PATH`.
   * @default '/creations/{id}'
   */
  creationPath: string;
  /**
   * Path of the model catalog under `{base_url}`. `IMAGEGEN_MODELS_PATH`.
   * @default '/models'
   */
  modelsPath: string;
  /**
   * Header that carries the idempotency key of a submission, unless {@link idempotencyField} is set.
   * `IMAGEGEN_IDEMPOTENCY_HEADER`.
   * @default 'Idempotency-Key'
   */
  idempotencyHeader: string;
  /**
   * A dotted body path (`idempotency_key`, `metadata.key`) that carries the idempotency key instead of a header: the
   * interface says the key travels in "a header or field". `IMAGEGEN_IDEMPOTENCY_FIELD`.
   * @default undefined (the key travels in {@link idempotencyHeader})
   */
  idempotencyField: string | undefined;
  /**
   * How the key is sent: `bearer` or `x-api-key`. `IMAGEGEN_AUTH_HEADER`.
   * @default 'bearer'
   */
  authHeader: AuthHeaderStyle;
  /**
   * Statuses that mean a creation has succeeded (any other status except `failed` is in flight), compared
   * case-insensitively. `IMAGEGEN_SUCCESS_STATUSES`, comma-separated.
   * @default DEFAULT_SUCCESS_STATUSES
   */
  successStatuses: readonly string[];
  /**
   * Statuses that say a creation is still in flight, compared case-insensitively (one that is also a success status
   * is a success). A status in none of the sets is waited out too, unless its record holds an image (by its bytes) or
   * something at an image path: then the batch stops (`unrecognised_status`) and names the word.
   * `IMAGEGEN_PENDING_STATUSES`, comma-separated.
   * @default DEFAULT_PENDING_STATUSES
   */
  pendingStatuses: readonly string[];
  /**
   * Where a creation record says what it cost (USD, the whole creation): dotted paths tried in order; the value may
   * be a number, a decimal string or an object with `usd`/`amount` and a USD `currency`. `IMAGEGEN_COST_FIELDS`,
   * comma-separated.
   * @default DEFAULT_COST_FIELDS (`cost_usd` first)
   */
  costFields: readonly string[];
  /**
   * Where a model record of the catalog says its price (USD per image), read the same way. `IMAGEGEN_PRICE_FIELDS`,
   * comma-separated.
   * @default DEFAULT_PRICE_FIELDS (`price_usd` first)
   */
  priceFields: readonly string[];
  /**
   * Where a creation record (at the root, or under `data` or `creation`) carries its id: paths (see
   * `src/api/record-path.ts`) tried in order, the first holding a string or a number winning. `IMAGEGEN_ID_FIELDS`,
   * comma-separated.
   * @default DEFAULT_ID_FIELDS (`id`)
   */
  idFields: readonly string[];
  /**
   * Where a creation record carries its status: paths tried in order, the first holding a string winning.
   * `IMAGEGEN_STATUS_FIELDS`, comma-separated.
   * @default DEFAULT_STATUS_FIELDS (`status`)
   */
  statusFields: readonly string[];
  /**
   * Where a failed creation's record carries the service's error text: paths tried in order, the first holding
   * anything but null winning. `IMAGEGEN_ERROR_FIELDS`, comma-separated.
   * @default DEFAULT_ERROR_FIELDS (`error`)
   */
  errorFields: readonly string[];
  /**
   * Where a succeeded creation's record carries its images: paths tried in order, the first that finds any image
   * winning; each value found may be an http(s) URL, a `data:image/...;base64,` URI, base64 image bytes, or an object
   * with `url` (and `width`, `height`). When none finds an image, the record is searched (see `discoverImages` in
   * `src/api/schemas.ts`). `IMAGEGEN_IMAGE_FIELDS`, comma-separated.
   * @default DEFAULT_IMAGE_FIELDS (`images[].url` first)
   */
  imageFields: readonly string[];
  /**
   * Whether a succeeded record whose image paths find nothing is searched for images: every http(s) URL in it is a
   * candidate, kept only when its bytes are an image (see `src/api/discover.ts`). `IMAGEGEN_IMAGE_DISCOVERY`, `on` or
   * `off`.
   * @default true (`on`)
   */
  imageDiscovery: boolean;
  /**
   * Where a model record of the catalog carries the model's id: paths tried in order. `IMAGEGEN_MODEL_ID_FIELDS`,
   * comma-separated.
   * @default DEFAULT_MODEL_ID_FIELDS (`id`)
   */
  modelIdFields: readonly string[];
  /**
   * Minimum interval between two polls of one creation; raised (per process) to any longer Retry-After a poll
   * was given. `IMAGEGEN_MIN_POLL_INTERVAL_MS`.
   * @default 2000
   */
  minPollIntervalMs: number;
  /**
   * When a creation is polled: `learn` times polls from the generation times this worker has seen, per model, and
   * from which limit binds (docs/waits.md); `interval` polls at the minimum interval from acceptance.
   * `IMAGEGEN_POLL_PLAN`. A task queue that holds keys back only in a burst is not read as the rate (poll-plan.ts).
   * @default 'learn'
   */
  pollPlan: PollPlanMode;
  /**
   * TCP (and TLS) connect timeout. `IMAGEGEN_CONNECT_TIMEOUT_MS`.
   * @default 10000
   */
  connectTimeoutMs: number;
  /**
   * Time allowed from sending a request to receiving the response headers. `IMAGEGEN_HEADERS_TIMEOUT_MS`.
   * @default 30000
   */
  headersTimeoutMs: number;
  /**
   * Longest silence allowed between two chunks of a response body. `IMAGEGEN_BODY_TIMEOUT_MS`.
   * @default 30000
   */
  bodyTimeoutMs: number;
  /**
   * Longest time one request may take from sending to the last byte of its body, and one image download (its
   * redirects and its body): the body timeout only bounds the silence between two chunks, so a body that drips
   * one byte at a time would otherwise never end. A submission that runs out of time is an unknown outcome
   * (retried with the same key). `IMAGEGEN_REQUEST_TIMEOUT_MS`.
   * @default 60000
   */
  requestTimeoutMs: number;
  /**
   * Largest service (JSON) response body read; a larger one is aborted and treated as no answer.
   * `IMAGEGEN_MAX_RESPONSE_BYTES`.
   * @default 1048576
   */
  maxResponseBytes: number;
  /**
   * Largest image downloaded; a larger one is aborted with a clear error. `IMAGEGEN_MAX_DOWNLOAD_BYTES`.
   * @default 52428800
   */
  maxDownloadBytes: number;
  /**
   * Redirects followed by an image download (never with the key). `IMAGEGEN_DOWNLOAD_MAX_REDIRECTS`.
   * @default 3
   */
  downloadMaxRedirects: number;
  /**
   * Submissions of one key whose outcome stays unknown (no response, timeout, reset, 500) before the attempt
   * ends as `Unknown`. `IMAGEGEN_MAX_AMBIGUOUS_TRIES`.
   * @default 6
   */
  maxAmbiguousTries: number;
  /**
   * How long the service remembers an idempotency key (docs/contract-defaults.md: 24 h). A key first sent longer ago than this, whose
   * outcome is not known, is never sent again (the service may take it as new, and charge it again): the row is
   * reported `unknown`. `IMAGEGEN_IDEMPOTENCY_WINDOW_MS`.
   * @default 86_400_000 (24 h)
   */
  idempotencyWindowMs: number;
  /**
   * How long a poll of a creation this key was accepted with may go on answering 404 ERR_NOT_FOUND, counted from the
   * first 404 of a run: a service whose reads lag its writes answers so until its store catches up. The creation is
   * polled again with backoff meanwhile; 0 ends it lost at the first 404. `IMAGEGEN_NOT_FOUND_WINDOW_MS`.
   * @default 90_000 (90 s)
   */
  notFoundWindowMs: number;
  /**
   * First backoff after an unknown outcome; doubled each time, with jitter. `IMAGEGEN_BACKOFF_BASE_MS`.
   * @default 1000
   */
  backoffBaseMs: number;
  /**
   * Ceiling of that backoff. `IMAGEGEN_BACKOFF_MAX_MS`.
   * @default 60000
   */
  backoffMaxMs: number;
  /**
   * Wait used when a 429 or 503 carries no usable Retry-After. `IMAGEGEN_DEFAULT_RETRY_AFTER_MS`.
   * @default 1000
   */
  defaultRetryAfterMs: number;
  /**
   * A fixed in-process pace of requests, per second (0: none, the rate is learnt when {@link learnLimits} is on).
   * Only sub-second waits are slept in process; longer ones become an activity retry. `IMAGEGEN_CLIENT_RATE_PER_SEC`.
   * @default 0
   */
  clientRatePerSec: number;
  /**
   * Whether each worker learns the key's rate and the account's quota from their 429s and keeps under them
   * (`src/api/learned-rate.ts`, `src/api/quota-gate.ts`). `IMAGEGEN_LEARN_LIMITS`, `on` or `off`.
   * @default true (`on`)
   */
  learnLimits: boolean;
  /**
   * Burst of that pacer. `IMAGEGEN_CLIENT_RATE_BURST`.
   * @default 10
   */
  clientRateBurst: number;
  /**
   * Connections kept per origin. `IMAGEGEN_HTTP_CONNECTIONS`.
   * @default 16
   */
  httpConnections: number;
  /**
   * Hosts, addresses and CIDR blocks that image downloads may reach besides public addresses (and the base URL's
   * own host): loopback, private and link-local addresses are refused otherwise, after DNS resolution and on every
   * redirect (see `src/api/download-guard.ts`). `IMAGEGEN_DOWNLOAD_ALLOW_HOSTS`, comma-separated.
   * @default none
   */
  downloadAllowHosts: readonly string[];
  /**
   * Absolute folders a schedule's local source may be in, besides the schedule's own output folder.
   * `IMAGEBATCH_SCHEDULE_SOURCES`, comma-separated.
   * @default none
   */
  scheduleSources: readonly string[];
  /**
   * Where each request field goes in the submit body: comma-separated `<field>=<target>`, the field one of prompt,
   * model, negative_prompt, width, height, seed, num_images, the target a name or a dotted path that makes nested
   * objects (`prompt=input.text,num_images=n`). Unlisted fields keep their names. `IMAGEGEN_REQUEST_FIELDS`.
   * Changing it while rows are in flight makes their retries a 400 (same key, another body).
   * @default every field under its own name (docs/contract-defaults.md)
   */
  requestFields: RequestFields;
  /**
   * Fixed fields merged into every submit body: a JSON object of at most 8 KiB that sets no mapped field. Never put a
   * secret here: configuration may be logged. `IMAGEGEN_REQUEST_TEMPLATE`.
   * @default {} (nothing added)
   */
  requestTemplate: Readonly<Record<string, unknown>>;
}
