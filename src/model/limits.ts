/** The service's limits as a worker meets them: which one binds, and for how long it counts. */

/**
 * The limit of the service that binds a worker's keys, as the worker judges it from what it met in the last half
 * minute: `concurrency`, the account's quota of creations in flight (a 429 ERR_QUOTA_EXCEEDED); `rate`, the key's
 * request rate (any other 429, or keys held in the task queue by its rate limit, `IMAGEBATCH_RATE_LIMIT`, set under
 * the key's rate); `open`, neither (keys held only by busy workers included).
 */
export const BINDING_LIMITS = ['open', 'rate', 'concurrency'] as const;
export type BindingLimit = (typeof BINDING_LIMITS)[number];

/**
 * How long a worker counts a limit it met as binding (ms), and how long a batch's progress shows the limit a row
 * reported (workflow time).
 */
export const LIMIT_MEMORY_MS = 30_000;
