import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Runtime } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, beforeEach, vi } from 'vitest';
import { main } from '../../src/cli/main';

/** What {@link inProcessCli} gives a test file: its folder, and what the last commands printed. */
export interface InProcessCli {
  /** A temporary folder of the file's own, removed after its tests. */
  readonly dir: string;
  /** What the commands of the current test wrote to stdout and stderr, piece by piece. */
  readonly stdout: string[];
  readonly stderr: string[];
  /** Runs `imagebatch ...args` through the real entry, `main()`, with `env` as its whole environment. */
  run(env: Record<string, string>, ...args: string[]): Promise<number>;
}

/**
 * The CLI in the test's own process, for unit tests: registers the hooks that make the folder, clear the output
 * before each test, and keep a command from installing a second Temporal runtime (test/setup.ts installed one).
 */
export function inProcessCli(prefix: string): InProcessCli {
  let dir = '';
  let stdout: string[] = [];
  let stderr: string[] = [];
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), prefix));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    stdout = [];
    stderr = [];
    vi.spyOn(Runtime, 'install').mockImplementation(() => Runtime.instance());
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  return {
    get dir() {
      return dir;
    },
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    run: (env, ...args) =>
      main(['node', 'imagebatch', ...args], {
        env,
        stdout: (text) => void stdout.push(text),
        stderr: (text) => void stderr.push(text),
        stderrIsTTY: false,
      }),
  };
}
