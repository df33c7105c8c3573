import { z } from 'zod';
import { durationMs } from '../config/duration';
import { formatWait, ID_PATTERN, windowsIdProblem } from '../model';
import { OptionError } from './errors';

/**
 * The pieces every command's option schema is built from. Each takes commander's raw string and gives the typed
 * value, or an issue whose message says what is wrong and quotes the value; main.ts prefixes the option's name
 * (`imagebatch: --spend-cap: must be ...`) and exits 2 before anything connects or starts.
 *
 * Durations have one grammar in the whole CLI: the SDK's `Duration` strings, read by the SDK's own reader
 * (`90s`, `45m`, `2h`, `1.5h`, `30 minutes`, `1500ms`), always with a unit.
 */

/** What a batch id (and a schedule id) may be. */
export const ID_RULE = 'must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, not only dots';

/** A decimal number of USD, as `--spend-cap` and `--price` take it. */
export const USD_PATTERN = /^\d+(\.\d+)?$/;

const got = (value: string) => ` (got ${JSON.stringify(value)})`;

/** A raw string checked and turned into a value by `parse`, which returns the value or what is wrong. */
export const checked = <T>(parse: (value: string) => { value: T } | { problem: string }) =>
  z.string().transform((raw, ctx): T => {
    const result = parse(raw);
    if ('value' in result) return result.value;
    ctx.addIssue({ code: 'custom', message: result.problem + got(raw) });
    return z.NEVER;
  });

/** Dollars, ≥ 0: `--spend-cap`. */
export const dollars = checked<number>((raw) =>
  USD_PATTERN.test(raw.trim()) ? { value: Number(raw.trim()) } : { problem: 'must be a number of dollars ≥ 0' },
);

/** A whole number ≥ 1: `--concurrency`, `--max-attempts`. */
export const positiveInt = checked<number>((raw) => {
  const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(n) && n >= 1 ? { value: n } : { problem: 'must be a whole number of at least 1' };
});

/** A TCP port on 127.0.0.1, 0 for any free one. */
export const port = checked<number>((raw) => {
  const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  return n <= 65535 ? { value: n } : { problem: 'must be a port, a whole number from 0 to 65535' };
});

/** Options of {@link duration}. */
export interface DurationOptions {
  /**
   * The longest duration allowed, in milliseconds.
   * @default no bound
   */
  maxMs?: number;
  /**
   * Examples the message shows.
   * @default '90s, 45m or 2h'
   */
  examples?: string;
}

/** The shortest duration any option takes. */
const MIN_DURATION_MS = 1000;

/** A duration of at least 1 s (and at most `maxMs`), in milliseconds: `--max-poll-wait`, `--every`, `--max-wait`. */
export const duration = ({ maxMs, examples = '90s, 45m or 2h' }: DurationOptions = {}) =>
  checked<number>((raw) => {
    const value = durationMs(raw);
    const bounds = maxMs === undefined ? 'at least 1 s' : `at least 1 s and at most ${formatWait(maxMs)}`;
    return Number.isFinite(value) && value >= MIN_DURATION_MS && value <= (maxMs ?? Infinity)
      ? { value }
      : { problem: `must be a duration of ${bounds}, such as ${examples}` };
  });

const isoDateTime = z.iso.datetime({ offset: true, local: true });

/** An ISO 8601 date-time (without a zone: this machine's), as an ISO string in UTC: `--deadline`. */
export const deadline = checked<string>((raw) =>
  isoDateTime.safeParse(raw.trim()).success
    ? { value: new Date(raw.trim()).toISOString() }
    : { problem: 'must be an ISO 8601 date-time such as 2030-01-31T18:00:00Z' },
);

/** A batch id or a schedule id. */
export const batchId = checked<string>((raw) => {
  if (!ID_PATTERN.test(raw)) return { problem: ID_RULE };
  const windows = windowsIdProblem(raw);
  return windows ? { problem: windows } : { value: raw };
});

/**
 * A repeatable option's values (commander collects them), each parsed by `parse` on top of those before it; an
 * {@link OptionError} it throws (`--price`, `--carry`...) becomes the issue.
 */
export const repeated = <T>(parse: (value: string, previous: T | undefined) => T) =>
  z
    .array(z.string())
    .optional()
    .transform((values, ctx): T | undefined => {
      let out: T | undefined;
      for (const value of values ?? []) {
        try {
          out = parse(value, out);
        } catch (err) {
          if (!(err instanceof OptionError)) throw err;
          ctx.addIssue({ code: 'custom', message: err.problem });
          return z.NEVER;
        }
      }
      return out;
    });

/** `--json`, `--follow` and the other switches: true or absent. */
export const flag = z.boolean().optional();
