import ms, { type StringValue } from 'ms';

/**
 * Milliseconds of a duration with a unit (`90s`, `45m`, `30 minutes`, as `ms` reads them), or NaN: a bare number is
 * refused, since which unit is meant is anybody's guess. The one reading of durations, for options and variables.
 */
export function durationMs(raw: string): number {
  const text = raw.trim();
  if (!/[a-z]\s*$/i.test(text)) return NaN;
  try {
    return Math.round(ms(text as StringValue));
  } catch {
    return NaN; // empty, or longer than ms reads
  }
}
