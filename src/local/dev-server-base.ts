import { processEnv, type Env } from '../config/env';
import { devServerEnv } from '../config/dev-server-env';
import { loadToolchainOverrides } from '../config/toolchain-config';
import { requireTemporalCli } from '../temporal/toolchain';

/**
 * What every `DevServer.start` begins with: the server's allow-listed environment (never the caller's own, which
 * holds the worker's key), and the Temporal CLI (`IMAGEBATCH_TEMPORAL_CLI`'s binary when set, else the pinned one).
 */
export function devServerBase(env: Env = processEnv()): { env: Record<string, string>; executable: string } {
  return { env: devServerEnv(env), executable: requireTemporalCli(loadToolchainOverrides(env).temporalCli) };
}
