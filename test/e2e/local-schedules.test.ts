import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localPaths } from '../../src/local/home';
import { runningWorker } from '../../src/local/local';
import { readState, type ServerState } from '../../src/local/state';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from '../cli/helpers';

/**
 * Local mode keeps schedules alive (issue 33, point 5): after `local stop`, a schedule command that starts the local
 * server again starts the worker too, as `run` does; without the worker's settings it says that no worker runs and
 * what starts one. Through the `imagebatch` command, in a home of the test's own.
 */
let sim: Simulator;
let dir: string;
let home: string;
let file: string;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-local-schedules-'));
  home = path.join(dir, 'home');
  file = path.join(dir, 'prompts.csv');
  await writeFile(file, 'id,prompt\na,a red kite over a beach\n');
  sim = await startSimulator({});
}, 300_000);

afterAll(async () => {
  if (home) await cli(['local', 'stop', '--home', home], { env: localEnv(), timeoutMs: 60_000 });
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Local mode (no Temporal settings), with the simulator's address and key unless `withKey` is false. */
function localEnv(withKey = true): Record<string, string> {
  const { IMAGEBATCH_LOCAL: _off, ...env } = baseEnv({
    IMAGEBATCH_HOME: home,
    XDG_CONFIG_HOME: path.join(dir, 'no-config'),
    ...(withKey ? { IMAGEGEN_BASE_URL: sim.baseUrl, IMAGEGEN_API_KEY: DEMO_API_KEY } : {}),
  });
  return env;
}

const workerRuns = () => {
  const paths = localPaths(home);
  return runningWorker(paths, readState<ServerState>(paths.serverState)) !== undefined;
};

describe('local mode keeps schedules alive', { timeout: 300_000 }, () => {
  it('schedule ls after local stop starts the worker again; without its settings it says none runs', async () => {
    // Once a year: no tick fires during the test.
    // The file is in the schedule's output folder: the only one its worker reads by default.
    const create = [
      'schedule',
      'create',
      'yearly',
      '--file',
      file,
      '--out',
      dir,
      '--cron',
      '0 0 1 1 *',
      '--model',
      'flux-dev',
    ];
    const created = await cli(create, { env: localEnv(), timeoutMs: 180_000 });
    expect(created.code, describeRun(create, created)).toBe(0);
    expect(workerRuns()).toBe(true);

    const stop = ['local', 'stop', '--home', home];
    expect((await cli(stop, { env: localEnv(), timeoutMs: 60_000 })).code).toBe(0);
    expect(workerRuns()).toBe(false);
    const ls = await cli(['schedule', 'ls'], { env: localEnv(), timeoutMs: 180_000 });
    expect(ls.code, describeRun(['schedule', 'ls'], ls)).toBe(0);
    expect(ls.stdout).toContain('yearly\tactive');
    expect(ls.stderr).toContain('started the local worker');
    expect(workerRuns()).toBe(true);

    expect((await cli(stop, { env: localEnv(), timeoutMs: 60_000 })).code).toBe(0);
    const keyless = await cli(['schedule', 'describe', 'yearly'], { env: localEnv(false), timeoutMs: 180_000 });
    expect(keyless.code, describeRun(['schedule', 'describe', 'yearly'], keyless)).toBe(0);
    expect(keyless.stdout).toContain('runs: cron 0 0 1 1 * (UTC)');
    expect(keyless.stderr).toMatch(
      /imagebatch: no local worker runs, so no scheduled run starts .*imagebatch local start/,
    );
    expect(workerRuns()).toBe(false);
  });
});
