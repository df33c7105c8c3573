/**
 * The process's environment. src/config is the only folder that reads `process.env` (test/repo/env-readers.test.ts):
 * each setting is parsed once, by its loader here, from the environment a caller passes or from this one.
 */

/** An environment: variable names to their values. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * The environment this process was started with: what the CLI reads its settings from, and what it hands on (through
 * an allow-list such as `devServerEnv`) to the processes it starts.
 */
export function processEnv(): Env {
  return process.env;
}
