import { z } from 'zod';
import type { Env } from './env';
import { gotValue } from './redact';
import { ConfigError } from './service-config';

/** The log level of the worker and the CLI (Temporal's SDK logger), from the environment only. */

export const LOG_LEVEL_ENV = 'IMAGEBATCH_LOG_LEVEL';

/** The values {@link LOG_LEVEL_ENV} takes (any case), each with the SDK logger's level. */
export const LOG_LEVELS = { debug: 'DEBUG', warn: 'WARN' } as const;
export type LogLevel = (typeof LOG_LEVELS)[keyof typeof LOG_LEVELS];

/** Its one schema: a name of {@link LOG_LEVELS} (any case) to the SDK logger's level. */
const logLevel = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(Object.keys(LOG_LEVELS) as [keyof typeof LOG_LEVELS]))
  .transform((name) => LOG_LEVELS[name]);

/** Warnings and errors only, when the variable is unset or empty. */
export const LOG_LEVEL_DEFAULT: LogLevel = LOG_LEVELS.warn;

/**
 * Reads {@link LOG_LEVEL_ENV}: `debug` or `warn`. Any other value throws a {@link ConfigError} naming the variable.
 * @default LOG_LEVEL_DEFAULT when unset or empty
 */
export function loadLogLevel(env: Env = process.env): LogLevel {
  const raw = env[LOG_LEVEL_ENV];
  if (raw === undefined || raw.trim() === '') return LOG_LEVEL_DEFAULT;
  const parsed = logLevel.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    LOG_LEVEL_ENV,
    `must be ${Object.keys(LOG_LEVELS).join(' or ')}${gotValue(LOG_LEVEL_ENV, raw)}`,
  );
}
