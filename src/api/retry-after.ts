/**
 * The longest wait a `Retry-After` can impose: one hour. A longer value is far more likely a broken header or
 * proxy than a plan, and it would hold every request of the key in this worker for that long; after an hour the
 * client asks again, which costs one free request (a 429) or one refunded attempt (a 503), and learns a new wait.
 */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

/**
 * `Retry-After` in both of its HTTP forms: delay-seconds (`120`, decimals tolerated) and an HTTP-date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`, relative to `nowMs`). Returns milliseconds between 0 and
 * {@link MAX_RETRY_AFTER_MS}, or undefined when the header is missing or unusable, so that the caller applies its
 * default. A date in the past gives 0.
 */
export function parseRetryAfter(
  value: string | readonly string[] | undefined | null,
  nowMs: number,
): number | undefined {
  const raw: unknown = typeof value === 'string' || value == null ? value : value[0];
  if (typeof raw !== 'string') return undefined;
  const text = raw.trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) {
    // A number too long for a double is still a (very) long wait, not garbage: it is capped like any other.
    return Math.min(MAX_RETRY_AFTER_MS, Math.ceil(Number(text) * 1000));
  }
  // An HTTP-date always names a weekday or month and the time: refuse bare numbers and odd strings that
  // Date.parse would still accept.
  if (!/[A-Za-z]{3}/.test(text) || !/\d{1,2}:\d{2}/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.ceil(at - nowMs)));
}

/** {@link parseRetryAfter}, or `fallbackMs` when the header is missing or unusable. */
export function retryAfterOr(
  value: string | readonly string[] | undefined | null,
  nowMs: number,
  fallbackMs: number,
): number {
  return parseRetryAfter(value, nowMs) ?? fallbackMs;
}
