/**
 * `Retry-After` in both of its HTTP forms: delay-seconds (`120`, decimals tolerated) and an HTTP-date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`, relative to `nowMs`). Returns milliseconds, or undefined when the header
 * is missing or unusable, so that the caller applies its default. A date in the past gives 0.
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
    const seconds = Number(text);
    return Number.isFinite(seconds) ? Math.ceil(seconds * 1000) : undefined;
  }
  // An HTTP-date always names a weekday or month and the time: refuse bare numbers and odd strings that
  // Date.parse would still accept.
  if (!/[A-Za-z]{3}/.test(text) || !/\d{1,2}:\d{2}/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/** {@link parseRetryAfter}, or `fallbackMs` when the header is missing or unusable. */
export function retryAfterOr(
  value: string | readonly string[] | undefined | null,
  nowMs: number,
  fallbackMs: number,
): number {
  return parseRetryAfter(value, nowMs) ?? fallbackMs;
}
