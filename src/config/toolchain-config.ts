import type { Env } from './env';

/**
 * Binaries named in the environment in place of the project's pinned Temporal toolchain (src/temporal/toolchain.ts,
 * docs/toolchain.md). A path that does not exist is passed over, as before: the pinned binary is used.
 */

export const TEMPORAL_CLI_ENV = 'IMAGEBATCH_TEMPORAL_CLI';
export const TEMPORAL_TEST_SERVER_ENV = 'IMAGEBATCH_TEMPORAL_TEST_SERVER';

export interface ToolchainOverrides {
  /** A `temporal` binary (`temporal server start-dev`). `IMAGEBATCH_TEMPORAL_CLI`. @default the pinned one */
  temporalCli?: string;
  /** A time-skipping test server. `IMAGEBATCH_TEMPORAL_TEST_SERVER`. @default the pinned one */
  testServer?: string;
}

/** Reads the two variables; unset or empty ones are left out. */
export function loadToolchainOverrides(env: Env = process.env): ToolchainOverrides {
  const temporalCli = env[TEMPORAL_CLI_ENV]?.trim();
  const testServer = env[TEMPORAL_TEST_SERVER_ENV]?.trim();
  return { ...(temporalCli ? { temporalCli } : {}), ...(testServer ? { testServer } : {}) };
}
