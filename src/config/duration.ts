import type { Duration } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';

/**
 * Milliseconds of a duration with a unit (`90s`, `45m`, `30 minutes`, read by the Temporal SDK's own reader of
 * `Duration` strings), or NaN: a bare number is refused, since which unit is meant is anybody's guess. The one reading
 * of durations, for options and variables.
 */
export function durationMs(raw: string): number {
  const text = raw.trim();
  if (!/[a-z]\s*$/i.test(text)) return NaN;
  try {
    return Math.round(msToNumber(text as Duration));
  } catch {
    return NaN; // empty, not a duration, or longer than the SDK reads
  }
}
