import { copyFile, mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { WorkerProcess, baseEnv, cli, describeRun, ensureDistIsFresh } from '../cli/helpers';
import { KEYS_KEPT_MS, keysForgotten } from '../helpers/keys-forgotten';

/**
 * A store once used is never silently replaced (issue 43, point 1). A tester deleted ledger.sqlite, or emptied it
 * to 0 bytes, and the same rows paid all 4 again with "4 new"; another data folder (another HOME or
 * XDG_DATA_HOME) does the same. Here each stops `run` and the worker with what was expected, the simulator's charge
 * book shows nothing paid again, and each way on that the message names is followed: the store put back, the old
 * store named, or `imagebatch ledger new`, which pays again only as it said.
 */

let dir: string;
let sim: Simulator;
let server: DevServer;
let worker: WorkerProcess | undefined;
const QUEUE = 'imagebatch-store-identity';

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-store-identity-'));
  sim = await startSimulator({
    seed: 43,
    accounts: [{ id: 'acct', models: ['flux-dev'], keys: [{ id: 'key', key: DEMO_API_KEY }] }],
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
    // The service forgets a key after a few seconds: only the store keeps a request from being paid again.
    idempotency: { ttlMs: KEYS_KEPT_MS },
  });
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
});

afterAll(async () => {
  await stopWorker();
  await server?.stop();
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const paid = () => sim.charges.byCreation().filter((c) => c.netUsd > 0).length;

/** One user's machine: a home, its data folder (where the default store is) and its config folder. */
const home = () => ({
  HOME: dir,
  XDG_DATA_HOME: path.join(dir, 'data'),
  XDG_CONFIG_HOME: path.join(dir, 'config'),
});
const storeFile = (data: string) => path.join(data, 'imagebatch', 'ledger.sqlite');
const envOf = (extra: Record<string, string>) =>
  baseEnv({
    ...home(),
    TEMPORAL_ADDRESS: server.address,
    TEMPORAL_TASK_QUEUE: QUEUE,
    IMAGEGEN_BASE_URL: sim.baseUrl,
    IMAGEGEN_API_KEY: DEMO_API_KEY,
    IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
    ...extra,
  });

async function stopWorker(): Promise<void> {
  await worker?.stop();
  worker = undefined;
}

/** The worker on these settings (the one before stopped: it closes the store). */
async function workerOn(extra: Record<string, string> = {}): Promise<void> {
  await stopWorker();
  worker = await WorkerProcess.start({ cwd: dir, env: envOf(extra) });
}

const RUN = ['run', 'prompts.csv', '--model', 'flux-dev', '--follow', '--json'];
const run = (extra: Record<string, string> = {}) => cli(RUN, { env: envOf(extra), cwd: dir, timeoutMs: 90_000 });

/** `run` and the worker both refuse, with `expected` in their message; nothing is paid. */
async function bothRefuse(extra: Record<string, string>, expected: string): Promise<string> {
  const before = paid();
  const r = await run(extra);
  expect(r.code, describeRun(RUN, r)).toBe(1);
  expect(r.stderr).toContain(expected);
  expect(r.stderr).toContain('Nothing was started');
  const w = await cli(['worker'], { env: envOf(extra), cwd: dir, timeoutMs: 30_000 });
  expect(w.code, describeRun(['worker'], w)).toBe(1);
  expect(w.stderr).toContain(expected);
  expect(paid()).toBe(before);
  return r.stderr;
}

describe('a store once used is never silently replaced', { timeout: 300_000 }, () => {
  it('deleted, emptied, or another data folder: stopped; each way on pays nothing again, or as it said', async () => {
    const rows = ['id,prompt', ...Array.from({ length: 4 }, (_, i) => `r${i},a kept picture number ${i}`)];
    await writeFile(path.join(dir, 'prompts.csv'), `${rows.join('\n')}\n`);
    const store = storeFile(home().XDG_DATA_HOME);
    await workerOn();
    const first = await run();
    expect(first.code, describeRun(RUN, first)).toBe(0);
    expect(paid()).toBe(4);
    await stopWorker();
    const backup = path.join(dir, 'backup.sqlite');
    await copyFile(store, backup);
    await keysForgotten(sim);

    // Deleted: stopped, no store made in its place; put back from the backup, it pays nothing again.
    await rm(store);
    await bothRefuse({}, `the ledger store ${store} is missing`);
    await copyFile(backup, store);
    await workerOn();
    const restored = await run();
    expect(restored.code, describeRun(RUN, restored)).toBe(0);
    expect(paid()).toBe(4);
    await stopWorker();

    // Emptied to 0 bytes: stopped; put back, it runs.
    await truncate(store, 0);
    await bothRefuse({}, `the ledger store ${store} is an empty file (0 bytes)`);
    await copyFile(backup, store);

    // Another data folder (as under another HOME or XDG_DATA_HOME): stopped, naming the store to set.
    const moved = { XDG_DATA_HOME: path.join(dir, 'data2') };
    const said = await bothRefuse(moved, `Set IMAGEBATCH_LEDGER=${store} to go on with it`);
    expect(said).toContain(`the default ledger store is now ${storeFile(moved.XDG_DATA_HOME)}`);
    const named = { ...moved, IMAGEBATCH_LEDGER: store };
    await workerOn(named);
    const followed = await run(named);
    expect(followed.code, describeRun(RUN, followed)).toBe(0);
    expect(paid()).toBe(4);

    // Starting afresh is said, and pays again only as it said.
    await mkdir(moved.XDG_DATA_HOME, { recursive: true });
    const afresh = await cli(['ledger', 'new'], { env: envOf(moved), cwd: dir, timeoutMs: 30_000 });
    expect(afresh.code, describeRun(['ledger', 'new'], afresh)).toBe(0);
    expect(afresh.stdout).toContain('a request that store paid for may be paid again');
    await workerOn(moved);
    // The same rows under another batch id: the new store knows none of them.
    const fresh = [...RUN, '--batch-id', 'afresh'];
    const again = await cli(fresh, { env: envOf(moved), cwd: dir, timeoutMs: 90_000 });
    expect(again.code, describeRun(fresh, again)).toBe(0);
    expect(paid(), describeRun(fresh, again)).toBe(8);
  });
});
