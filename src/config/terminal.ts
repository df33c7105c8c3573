import type { Env } from './env';

/** What the terminal shows, from the environment: the `NO_COLOR` convention (no-color.org). */

export const NO_COLOR_ENV = 'NO_COLOR';

/**
 * Whether {@link NO_COLOR_ENV} turns colors off: set to any value but the empty string.
 * @default env: the process's
 */
export function noColor(env: Env = process.env): boolean {
  const value = env[NO_COLOR_ENV];
  return value !== undefined && value !== '';
}
