import type { Duration } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { z } from 'zod';
import { durationMs } from '../../config/duration';
import { checked } from '../options';
import { cronInterval, cronZone } from './cron-interval';

/**
 * The guards of `schedule create` (issue 33): a named time zone, a catch-up window and a jitter of its own instead of
 * Temporal's defaults, and no interval shorter than {@link MIN_SCHEDULE_INTERVAL_MS} unless confirmed.
 */

/** The time zone of a schedule that names none: cron times are read in it. */
export const DEFAULT_TIMEZONE = 'UTC';

/** The shortest interval taken without `--allow-frequent`: each run may pay for the whole file. */
export const MIN_SCHEDULE_INTERVAL_MS = 60_000;

/** The confirmation a shorter interval needs. */
export const ALLOW_FREQUENT_FLAG = '--allow-frequent';

/**
 * The default catch-up window is one interval of the schedule, within these bounds: a run missed while the server
 * was down is still taken until the next one is due, and never more than a day late (Temporal's own default is a year).
 */
export const CATCHUP_WINDOW_DEFAULT_MIN_MS = 60_000;
export const CATCHUP_WINDOW_DEFAULT_MAX_MS = 86_400_000;

/** The shortest catch-up window Temporal takes. */
export const CATCHUP_WINDOW_MIN_MS = 10_000;

/** No jitter unless asked: runs start at their time. */
export const DEFAULT_JITTER_MS = 0;

const DAY_MS = 86_400_000;

/** A duration for a person: `1 h`, `30 min`, `90 s`, `0 s`. */
export function formatDuration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 1000)} s`;
}

/** Whether the Node here knows `zone` as an IANA time zone name. */
function knownZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** `--timezone`: an IANA time zone name. */
export const timezone = checked<string>((raw) =>
  raw.trim() !== '' && knownZone(raw.trim())
    ? { value: raw.trim() }
    : { problem: 'must be an IANA time zone name such as UTC, Europe/Paris or America/New_York' },
);

/** `--catchup-window`: a duration of at least {@link CATCHUP_WINDOW_MIN_MS}. */
export const catchupWindow = checked<number>((raw) => {
  const ms = durationMs(raw);
  return Number.isFinite(ms) && ms >= CATCHUP_WINDOW_MIN_MS
    ? { value: ms }
    : { problem: `must be a duration of at least ${formatDuration(CATCHUP_WINDOW_MIN_MS)}, such as 30m or 6h` };
});

/** `--jitter`: a duration, 0s for none. */
export const jitter = checked<number>((raw) => {
  const ms = durationMs(raw);
  return Number.isFinite(ms) && ms >= 0 ? { value: ms } : { problem: 'must be a duration such as 0s, 30s or 5m' };
});

/** When a schedule runs, as `create` is given it: a cron expression or an interval. */
export type ScheduleWhen = { cron: string } | { every: Duration };

/** The shortest time between two runs, or why a cron expression cannot be read. */
export function intervalOf(when: ScheduleWhen): { ms: number } | { problem: string } {
  return 'cron' in when ? cronInterval(when.cron) : { ms: msToNumber(when.every) };
}

/** The default catch-up window of a schedule whose runs are `intervalMs` apart. */
export const defaultCatchupWindowMs = (intervalMs: number) =>
  Math.min(Math.max(intervalMs, CATCHUP_WINDOW_DEFAULT_MIN_MS), CATCHUP_WINDOW_DEFAULT_MAX_MS);

/** The options the guards read. */
export interface GuardedOptions {
  cron?: string | undefined;
  every?: number | undefined;
  jitter?: number | undefined;
  allowFrequent?: boolean | undefined;
}

/** The schema's check across options: each problem names its option (main.ts prints it) and says what to do. */
export function checkGuards(o: GuardedOptions, ctx: z.RefinementCtx): void {
  const option = o.cron !== undefined ? 'cron' : 'every';
  const when: ScheduleWhen | undefined =
    o.cron !== undefined ? { cron: o.cron } : o.every !== undefined ? { every: o.every } : undefined;
  if (!when) return;
  const zone = o.cron === undefined ? undefined : cronZone(o.cron);
  if (zone !== undefined) {
    const message = `must not name its time zone: give --timezone ${zone || '<IANA name>'} instead of CRON_TZ=`;
    ctx.addIssue({ code: 'custom', path: ['cron'], message });
    return;
  }
  const interval = intervalOf(when);
  if ('problem' in interval) {
    ctx.addIssue({ code: 'custom', path: ['cron'], message: `${interval.problem}, e.g. "0 2 * * *"` });
    return;
  }
  if (interval.ms < MIN_SCHEDULE_INTERVAL_MS && o.allowFrequent !== true) {
    const runs = Math.floor(DAY_MS / interval.ms);
    const message =
      `runs every ${formatDuration(interval.ms)}, shorter than ${formatDuration(MIN_SCHEDULE_INTERVAL_MS)}: ` +
      `${runs} runs a day, each may pay for the whole file; add ${ALLOW_FREQUENT_FLAG} if that is meant`;
    ctx.addIssue({ code: 'custom', path: [option], message });
    return;
  }
  if (o.jitter !== undefined && o.jitter > 0 && o.jitter >= interval.ms) {
    const message = `must be shorter than the schedule's interval (${formatDuration(interval.ms)})`;
    ctx.addIssue({ code: 'custom', path: ['jitter'], message });
  }
}
