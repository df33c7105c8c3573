import type { ScheduleDescription } from '@temporalio/client';
import { DEFAULT_JITTER_MS, DEFAULT_TIMEZONE, formatDuration } from './guards';

/** The memo key where `create` keeps when the schedule runs as it was given (the server keeps a cron as a calendar). */
export const WHEN_MEMO_KEY = 'imagebatchWhen';

/** When a schedule runs, as `describe` shows it. */
export interface ScheduleTiming {
  /** `cron 0 2 * * *` or `every 1 h`, as given to `create`. */
  when: string;
  /** The IANA time zone cron times are read in. */
  timezone: string;
  catchupWindowMs: number;
  jitterMs: number;
}

/** The memo `create` writes: `when` for {@link timingOf}. */
export const whenMemo = (when: { cron: string } | { everyMs: number }) => ({
  [WHEN_MEMO_KEY]: 'cron' in when ? `cron ${when.cron}` : `every ${formatDuration(when.everyMs)}`,
});

/** The timing of a schedule's description; one made elsewhere (no memo) shows its intervals or "calendar". */
export function timingOf(d: ScheduleDescription): ScheduleTiming {
  const memo = d.memo?.[WHEN_MEMO_KEY];
  const intervals = d.spec.intervals ?? [];
  const when =
    typeof memo === 'string'
      ? memo
      : intervals.length > 0
        ? intervals.map((i) => `every ${formatDuration(Number(i.every))}`).join(', ')
        : 'calendar';
  return {
    when,
    timezone: d.spec.timezone || DEFAULT_TIMEZONE,
    catchupWindowMs: d.policies.catchupWindow,
    jitterMs: d.spec.jitter ?? DEFAULT_JITTER_MS,
  };
}

/** `describe`'s lines: `cron 0 2 * * * (UTC)`, then the catch-up window and the jitter. */
export const timingLines = (t: ScheduleTiming): string[] => [
  `runs: ${t.when} (${t.timezone})`,
  `catch-up window: ${formatDuration(t.catchupWindowMs)}, jitter: ${formatDuration(t.jitterMs)}`,
];
