import { durationMs } from '../../config/duration';

/**
 * The shortest time between two runs of a Temporal cron expression, in milliseconds, read from its time of day only
 * (second, minute, hour): what the spending guard and the default catch-up window need. A cron that fires once a day
 * or less often gives a day, the longest these bounds look at. Day, month and year fields are left to the server.
 */
export type CronInterval = { ms: number } | { problem: string };

const DAY_MS = 86_400_000;
const DAY_S = 86_400;

/** Temporal's shorthands (`@daily`...) and their shortest interval. */
const SHORTHANDS: Readonly<Record<string, number>> = {
  '@hourly': 3_600_000,
  '@daily': DAY_MS,
  '@weekly': DAY_MS,
  '@monthly': DAY_MS,
  '@yearly': DAY_MS,
  '@annually': DAY_MS,
};

/** The time zone a cron expression names itself (`CRON_TZ=Europe/Paris 0 2 * * *`), if any. */
export function cronZone(cron: string): string | undefined {
  return /^\s*(?:CRON_)?TZ=(\S*)/i.exec(cron)?.[1];
}

export function cronInterval(cron: string): CronInterval {
  const text = cron.replace(/#.*$/, '').trim();
  const shorthand = SHORTHANDS[text.toLowerCase()];
  if (shorthand !== undefined) return { ms: shorthand };
  const every = /^@every\s+(\d+[smhd])(?:\/\d+[smhd])?$/i.exec(text);
  if (every) return { ms: durationMs(every[1]!) };
  if (text.startsWith('@')) return { problem: `cannot read ${JSON.stringify(text)}` };
  const fields = text.split(/\s+/);
  if (fields.length < 5 || fields.length > 7) {
    return { problem: 'must have 5, 6 or 7 fields (minute hour day month weekday [year], or second first)' };
  }
  const [second, minute, hour] = fields.length === 7 ? fields : ['0', ...fields];
  const seconds = values(second!, 59);
  const minutes = values(minute!, 59);
  const hours = values(hour!, 23);
  for (const [name, set] of [
    ['second', seconds],
    ['minute', minutes],
    ['hour', hours],
  ] as const) {
    if (typeof set === 'string') return { problem: `its ${name} field ${set}` };
  }
  return { ms: shortestGapMs(seconds as number[], minutes as number[], hours as number[]) };
}

/** The seconds of a day the three sets match, and the shortest gap between two of them (across midnight too). */
function shortestGapMs(seconds: number[], minutes: number[], hours: number[]): number {
  const times = hours
    .flatMap((h) => minutes.flatMap((m) => seconds.map((s) => h * 3600 + m * 60 + s)))
    .sort((a, b) => a - b);
  if (times.length < 2) return DAY_MS;
  let gap = times[0]! + DAY_S - times.at(-1)!;
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i]! - times[i - 1]!);
  return Math.min(gap * 1000, DAY_MS);
}

/** The values of one cron field (`*`, `5`, `1-5`, `*\/15`, `10/5`, lists of them) up to `max`, or what is wrong. */
function values(field: string, max: number): number[] | string {
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const m = /^(\*|\?|\d+)(?:-(\d+))?(?:\/(\d+))?$/.exec(part);
    if (!m) return `cannot be read: ${JSON.stringify(field)}`;
    const [, start, end, step] = m;
    const from = start === '*' || start === '?' ? 0 : Number(start);
    const to = end !== undefined ? Number(end) : start === '*' || start === '?' || step !== undefined ? max : from;
    const by = step === undefined ? 1 : Number(step);
    if (from > max || to > max || from > to || by < 1) return `is out of range 0-${max}: ${JSON.stringify(field)}`;
    for (let v = from; v <= to; v += by) out.add(v);
  }
  return [...out];
}
