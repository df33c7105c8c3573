import { devServerEnv } from '../../src/config/dev-server-env';
import { loadToolchainOverrides } from '../../src/config/toolchain-config';
import { requireTemporalCli } from '../../src/temporal/toolchain';

/**
 * What a test's `DevServer.start` begins with, as local mode's: the server's allow-listed environment (never the test
 * process's own), and the Temporal CLI (`IMAGEBATCH_TEMPORAL_CLI`'s binary when set, else the pinned one).
 */
export function devServerBase(): { env: Record<string, string>; executable: string } {
  return { env: devServerEnv(), executable: requireTemporalCli(loadToolchainOverrides().temporalCli) };
}
