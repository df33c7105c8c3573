import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localPaths } from '../../src/local/home';
import { pidAlive } from '../../src/local/processes';
import { readState, type ServerState, type WorkerState } from '../../src/local/state';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { BIN, REPO_ROOT, baseEnv, cli, describeRun, ensureDistIsFresh, waitUntil } from '../cli/helpers';
import {
  chargesOf,
  expectEveryRowFinal as checkEveryRowFinal,
  expectNothingPaidTwice as checkNothingPaidTwice,
} from '../helpers/batch-checks';

/**
 * Local mode as a person meets it: `imagebatch run FILE --model M` with the image-service key in the environment and
 * no Temporal address. The command starts the home's Temporal dev server and worker in sessions of their own, follows
 * the batch, and a crash of every process (SIGKILL) followed by the same command resumes the batch and pays nothing
 * twice.
 *
 * The first four tests run at the same time, each in a home of its own (its own server, worker, batch names and
 * prompts): they spend their time waiting for the simulator's generations, not computing. The last one needs the
 * first one's server, so it runs after them.
 */

const ROWS = 24;

let sim: Simulator;
let dir: string;
/** Every home a test used: its server and worker are stopped at the end, whatever happened. */
const homes: string[] = [];
/** The first test's home, whose server the last test reaches by its address. */
let killHome: string | undefined;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-local-'));
  sim = await startSimulator({
    // Above what four batches at once ask (about 40 rows in flight, a poll each 500 ms): no test here is about 429s.
    limits: { requestsPerSecond: 100, burst: 100, minPollIntervalMs: 500 },
    // Slow enough that a kill lands mid-batch.
    generation: { queuedMs: { minMs: 200, maxMs: 600 }, runningMs: { minMs: 1_500, maxMs: 3_000 } },
  });
});

afterAll(async () => {
  // At once: each stop waits for its own server and worker to exit.
  await Promise.all(
    homes.map((home) => cli(['local', 'stop', '--home', home], { env: localEnv(home), timeoutMs: 60_000 })),
  );
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The environment of a local run: the simulator's address and key, no Temporal settings at all. */
function localEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const { IMAGEBATCH_LOCAL: _off, ...env } = baseEnv({
    IMAGEBATCH_HOME: home,
    // No temporal.toml of the machine's user may name an address.
    XDG_CONFIG_HOME: path.join(dir, 'no-config'),
    IMAGEGEN_BASE_URL: sim.baseUrl,
    IMAGEGEN_API_KEY: DEMO_API_KEY,
    IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
    ...extra,
  });
  return env;
}

async function newHome(name: string): Promise<string> {
  const home = path.join(dir, name);
  homes.push(home);
  return home;
}

async function batchFile(name: string, rows = ROWS): Promise<string> {
  const file = path.join(dir, `${name}.csv`);
  const lines = Array.from(
    { length: rows },
    // Prompts of its own: a request paid by another test's batch would be reused, not paid.
    (_, i) => `${name}-${String(i + 1).padStart(2, '0')},a lighthouse number ${i + 1} for ${name}`,
  );
  await writeFile(file, ['id,prompt', ...lines].join('\n') + '\n');
  return file;
}

/** A CLI run in the background, to be killed or interrupted. */
function startCli(args: readonly string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  return { child, output: () => output };
}

/** The shared checks (test/helpers/batch-checks.ts), on this file's simulator. */
const charges = (batchId: string) => chargesOf(sim, batchId);
const expectNothingPaidTwice = (batchId: string) => checkNothingPaidTwice(sim, batchId);
const expectEveryRowFinal = (outDir: string, rows = ROWS) => checkEveryRowFinal(outDir, rows);

/** Lines of the Temporal server's own log (its banner or its structured lines) that must stay out of the terminal. */
const SERVER_NOISE = /Temporal Server:|Temporal Persistence:|level=|"level":/;

describe('local mode', () => {
  it.concurrent(
    'a batch survives SIGKILL of the command, the worker and the server, and the same command resumes it',
    async ({ expect }) => {
      const home = await newHome('kill');
      killHome = home;
      const paths = localPaths(home);
      const file = await batchFile('kill');
      const outDir = path.join(dir, 'kill-out');
      const args = ['run', file, '--model', 'flux-dev', '--out', outDir, '--concurrency', '6'];
      const env = localEnv(home);

      const first = startCli(args, env);
      // Mid-batch: some rows charged, the batch far from its end.
      await waitUntil('a few charges', async () => (charges('kill').perKey.size >= 6 ? true : undefined), 120_000, 100);
      const server = readState<ServerState>(paths.serverState)!;
      const worker = readState<WorkerState>(paths.workerState)!;
      expect(first.output()).toMatch(/running locally: state in .*, Temporal 127\.0\.0\.1:\d+, Web UI http/);
      for (const pid of [first.child.pid!, worker.pid, server.pid]) process.kill(pid, 'SIGKILL');
      await waitUntil(
        'every process gone',
        async () =>
          [worker.pid, server.pid].some(pidAlive) || (first.child.exitCode === null && first.child.signalCode === null)
            ? undefined
            : true,
        10_000,
        50,
      );
      const chargedAtKill = charges('kill').perKey.size;
      expect(chargedAtKill).toBeLessThan(ROWS);

      const again = await cli(args, { env, timeoutMs: 240_000 });
      expect(again.code, describeRun(args, again)).toBe(0);
      expect(again.stderr).toMatch(/started the local Temporal server/);
      expect(again.stderr).toMatch(/attached to batch kill/);
      expect(again.stderr).not.toMatch(SERVER_NOISE);
      expect(again.stdout).toMatch(new RegExp(`${ROWS}/${ROWS}`));
      // A new server on the same SQLite file (and the same ports), a new worker.
      const restarted = readState<ServerState>(paths.serverState)!;
      expect(restarted.pid).not.toBe(server.pid);
      expect(restarted.address).toBe(server.address);
      await expectEveryRowFinal(outDir);
      expectNothingPaidTwice('kill');
      // The server's restart went to its log, in the home.
      expect(await readFile(paths.serverLog, 'utf8')).toMatch(SERVER_NOISE);

      // The key lives in the worker's environment only: nowhere in the home (state, logs, Temporal's database).
      for (const name of await readdir(home, { recursive: true })) {
        const full = path.join(home, name);
        const bytes = await readFile(full).catch(() => undefined);
        if (bytes) expect(bytes.includes(DEMO_API_KEY), full).toBe(false);
      }
    },
    360_000,
  );

  it.concurrent(
    'two runs of different files at once share one server and one worker, and both complete',
    async ({ expect }) => {
      const home = await newHome('shared');
      const env = localEnv(home);
      const [a, b] = await Promise.all(
        ['one', 'two'].map(async (name) => {
          const file = await batchFile(name, 8);
          const args = ['run', file, '--model', 'flux-dev', '--out', path.join(dir, `${name}-out`)];
          return { name, args, result: await cli(args, { env, timeoutMs: 240_000 }) };
        }),
      );
      for (const run of [a!, b!]) {
        expect(run.result.code, describeRun(run.args, run.result)).toBe(0);
        await expectEveryRowFinal(path.join(dir, `${run.name}-out`), 8);
        expectNothingPaidTwice(run.name);
      }
      const both = a!.result.stderr + b!.result.stderr;
      expect(both.match(/started the local Temporal server/g)).toHaveLength(1);
      expect(both.match(/started the local worker/g)).toHaveLength(1);
      const address = (text: string) => /Temporal (127\.0\.0\.1:\d+)/.exec(text)?.[1];
      expect(address(a!.result.stderr)).toBeDefined();
      expect(address(a!.result.stderr)).toBe(address(b!.result.stderr));

      // A shell with another key does not get the running worker: it is told which variable differs, never a value.
      const otherKey = DEMO_API_KEY.replace(/0/g, '1');
      const refusedArgs = [
        'run',
        await batchFile('three', 2),
        '--model',
        'flux-dev',
        '--out',
        path.join(dir, 'three-out'),
      ];
      const refused = await cli(refusedArgs, { env: localEnv(home, { IMAGEGEN_API_KEY: otherKey }) });
      expect(refused.code, describeRun(refusedArgs, refused)).toBe(1);
      expect(refused.stderr).toMatch(/local worker \(pid \d+.*other settings than this shell's \(IMAGEGEN_API_KEY\)/);
      expect(refused.stderr + refused.stdout).not.toContain(otherKey);
      expect(charges('three').perKey.size).toBe(0);

      // local status names both batches and what runs; local stop stops both processes.
      const status = await cli(['local', 'status', '--json'], { env });
      expect(status.code, describeRun(['local', 'status'], status)).toBe(0);
      const shown = JSON.parse(status.stdout) as {
        server: { pid: number; running: boolean };
        worker: { pid: number; running: boolean; settings: string[] };
        batches: { batchId: string; status: string }[];
      };
      expect(shown.server.running && shown.worker.running).toBe(true);
      expect(shown.worker.settings).toContain('IMAGEGEN_API_KEY');
      expect(status.stdout).not.toContain(DEMO_API_KEY);
      expect(shown.batches.map((x) => x.batchId).sort()).toEqual(['one', 'two']);
      const ui = await cli(['local', 'ui'], { env });
      expect(ui.stdout.trim()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows$/);
      expect((await fetch(ui.stdout.trim())).ok).toBe(true);
      const stop = await cli(['local', 'stop'], { env, timeoutMs: 60_000 });
      expect(stop.code, describeRun(['local', 'stop'], stop)).toBe(0);
      expect(pidAlive(shown.server.pid) || pidAlive(shown.worker.pid)).toBe(false);
      const after = JSON.parse((await cli(['local', 'status', '--json'], { env })).stdout) as Partial<typeof shown>;
      expect(after.server?.running).toBe(false);
      expect(after.worker).toBeUndefined();
      expect(after.batches).toBeUndefined();
    },
    360_000,
  );

  it.concurrent(
    'a worker killed while the command follows is started again, and the batch completes',
    async ({ expect }) => {
      const home = await newHome('supervise');
      const paths = localPaths(home);
      const file = await batchFile('supervise', 12);
      const outDir = path.join(dir, 'supervise-out');
      const run = startCli(['run', file, '--model', 'flux-dev', '--out', outDir, '--concurrency', '3'], localEnv(home));
      const exited = new Promise<number | null>((resolve) => run.child.once('exit', (c) => resolve(c)));
      await waitUntil(
        'a few charges',
        async () => (charges('supervise').perKey.size >= 3 ? true : undefined),
        120_000,
        100,
      );
      const worker = readState<WorkerState>(paths.workerState)!;
      process.kill(worker.pid, 'SIGKILL');
      expect(await exited, run.output()).toBe(0);
      expect(run.output().match(/started the local worker \(pid \d+/g)).toHaveLength(2);
      expect(readState<WorkerState>(paths.workerState)!.pid).not.toBe(worker.pid);
      await expectEveryRowFinal(outDir, 12);
      expectNothingPaidTwice('supervise');
    },
    300_000,
  );

  it.concurrent(
    'Ctrl-C stops following only: the batch goes on in the local worker',
    async ({ expect }) => {
      const home = await newHome('interrupt');
      const file = await batchFile('interrupt', 10);
      const outDir = path.join(dir, 'interrupt-out');
      const env = localEnv(home);
      const run = startCli(['run', file, '--model', 'flux-dev', '--out', outDir], env);
      await waitUntil('a charge', async () => (charges('interrupt').perKey.size > 0 ? true : undefined), 120_000, 100);
      run.child.kill('SIGINT');
      const code = await new Promise<number | null>((resolve) => run.child.once('exit', (c) => resolve(c)));
      expect(code).toBe(130);
      expect(run.output()).toMatch(/stopped following; batch interrupt goes on in the local worker/);
      // Nothing follows it any more, and it ends.
      await waitUntil(
        'the batch to end',
        async () => {
          const r = await cli(['status', 'interrupt', '--json'], { env });
          return r.code === 0 && (JSON.parse(r.stdout) as { done: boolean }).done ? true : undefined;
        },
        120_000,
        1_000,
      );
      expectNothingPaidTwice('interrupt');
    },
    300_000,
  );

  it('with TEMPORAL_ADDRESS set, run uses that server and starts nothing locally', async () => {
    // The "cluster" is the first test's local server, reached by its address from a shell whose home is empty.
    expect(killHome, 'the first test ran').toBeDefined();
    const cluster = readState<ServerState>(localPaths(killHome!).serverState);
    expect(cluster, 'the first test left its server running').toBeDefined();
    const home = await newHome('unused');
    const file = await batchFile('remote', 3);
    const env = localEnv(home, { TEMPORAL_ADDRESS: cluster!.address });
    const args = ['run', file, '--model', 'flux-dev', '--out', path.join(dir, 'remote-out'), '--json'];
    const r = await cli(args, { env, timeoutMs: 60_000 });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ batchId: 'remote', attached: false });
    expect(r.stderr).not.toMatch(/running locally|started the local/);
    await expect(readdir(home)).rejects.toThrow(/ENOENT/);
    // The batch is on that server: its own home's status lists it.
    const listed = await cli(['ls', '--json'], { env: localEnv(killHome!) });
    expect((JSON.parse(listed.stdout) as { batchId: string }[]).map((b) => b.batchId)).toContain('remote');
  }, 120_000);
});
