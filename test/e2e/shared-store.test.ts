import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { BatchProgress } from '../../src/model';
import { WorkerProcess, baseEnv, cli, describeRun, ensureDistIsFresh, waitUntil } from '../cli/helpers';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres';
import { KEYS_KEPT_MS, keysForgotten } from '../helpers/keys-forgotten';

/**
 * Beyond one machine: workers on two "hosts" (each its own working directory and home) and the CLI on a third share
 * one ledger store on PostgreSQL. Temporal's state is reset (a new, empty server) and the batch run again: nothing is
 * paid twice. A worker given another store sends nothing for a batch started on this one, and says why.
 */

let dir: string;
let pg: TestPostgres;
let ledgerUrl: string;
let sim: Simulator;
let server: DevServer | undefined;
const workers: WorkerProcess[] = [];
const QUEUE = 'imagebatch-shared';

/** A host of its own: a working directory and a home (HOME, XDG_DATA_HOME) no other process shares. */
async function host(name: string): Promise<{ cwd: string; env: Record<string, string> }> {
  const cwd = await mkdtemp(path.join(dir, `${name}-`));
  return { cwd, env: { HOME: cwd, XDG_DATA_HOME: path.join(cwd, 'data') } };
}

async function startWorkers(store: string, queue = QUEUE, count = 2): Promise<void> {
  for (let i = 0; i < count; i++) {
    const h = await host(`worker${i}`);
    workers.push(
      await WorkerProcess.start({
        cwd: h.cwd,
        env: baseEnv({
          ...h.env,
          TEMPORAL_ADDRESS: server!.address,
          TEMPORAL_TASK_QUEUE: queue,
          IMAGEGEN_BASE_URL: sim.baseUrl,
          IMAGEGEN_API_KEY: DEMO_API_KEY,
          IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
          IMAGEBATCH_LEDGER: store,
        }),
      }),
    );
  }
}

async function stopAll(): Promise<void> {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await server?.stop();
  server = undefined;
}

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-shared-'));
  pg = await startTestPostgres();
  ledgerUrl = await pg.createDatabase('imagebatch_ledger');
  sim = await startSimulator({
    seed: 31,
    accounts: [{ id: 'acct', models: ['flux-dev'], keys: [{ id: 'key', key: DEMO_API_KEY }] }],
    generation: { queuedMs: { minMs: 20, maxMs: 50 }, runningMs: { minMs: 100, maxMs: 300 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
    // The service forgets a key after a few seconds: a key sent again would be charged again.
    idempotency: { ttlMs: KEYS_KEPT_MS },
  });
});

afterAll(async () => {
  await stopAll();
  await sim?.close();
  await pg?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const paid = () => sim.charges.byCreation().filter((c) => c.netUsd > 0).length;

describe('workers of several hosts share one PostgreSQL ledger store', { timeout: 240_000 }, () => {
  it('a batch run again after Temporal is reset pays nothing twice, from any working directory', async () => {
    server = await DevServer.start({ ...devServerBase(), uiPort: false });
    await startWorkers(ledgerUrl);
    const cliHost = await host('cli');
    const lines = ['id,prompt', ...Array.from({ length: 8 }, (_, i) => `s${i},a shared picture number ${i}`)];
    await writeFile(path.join(cliHost.cwd, 'shared.csv'), `${lines.join('\n')}\n`);
    const cliEnv = () =>
      baseEnv({
        ...cliHost.env,
        TEMPORAL_ADDRESS: server!.address,
        TEMPORAL_TASK_QUEUE: QUEUE,
        IMAGEBATCH_LEDGER: ledgerUrl,
      });
    const run = ['run', 'shared.csv', '--model', 'flux-dev', '--concurrency', '4', '--follow', '--json'];
    const first = await cli(run, { env: cliEnv(), cwd: cliHost.cwd, timeoutMs: 90_000 });
    expect(first.code, describeRun(run, first)).toBe(0);
    expect((JSON.parse(first.stdout) as BatchProgress).counts).toMatchObject({ succeeded: 8 });
    expect(paid()).toBe(8);

    // Temporal's state is gone; new workers on new hosts, the same store.
    await stopAll();
    server = await DevServer.start({ ...devServerBase(), uiPort: false });
    await startWorkers(ledgerUrl);
    await keysForgotten(sim);
    const again = await cli(run, { env: cliEnv(), cwd: cliHost.cwd, timeoutMs: 90_000 });
    expect(again.code, describeRun(run, again)).toBe(0);
    expect((JSON.parse(again.stdout) as BatchProgress).counts).toMatchObject({ succeeded: 8 });
    // The same file from another host's directory, under another name: served by what was paid.
    const other = await host('elsewhere');
    await writeFile(path.join(other.cwd, 'copy.csv'), `${lines.join('\n')}\n`);
    const copy = ['run', 'copy.csv', '--model', 'flux-dev', '--follow', '--json'];
    const elsewhere = await cli(copy, { env: { ...cliEnv(), ...other.env }, cwd: other.cwd, timeoutMs: 90_000 });
    expect(elsewhere.code, describeRun(copy, elsewhere)).toBe(0);
    expect((JSON.parse(elsewhere.stdout) as BatchProgress).counts).toMatchObject({ reused: 8 });
    expect(paid()).toBe(8);
    expect(sim.charges.chargedTwice()).toEqual([]);
  });

  it('a worker on another store sends nothing for the batch, and its batch says which setting to fix', async () => {
    server ??= await DevServer.start({ ...devServerBase(), uiPort: false });
    // Its own SQLite file: another memory of what was paid.
    const lone = await host('lone');
    await startWorkers(path.join(lone.cwd, 'other-ledger.sqlite'), 'imagebatch-other', 1);
    const cliHost = await host('cli-other');
    await writeFile(path.join(cliHost.cwd, 'other.csv'), 'id,prompt\no1,a picture no worker may pay for\n');
    const env = baseEnv({
      ...cliHost.env,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_TASK_QUEUE: 'imagebatch-other',
      IMAGEBATCH_LEDGER: ledgerUrl,
    });
    const before = sim.charges.entries().length;
    const start = ['run', 'other.csv', '--model', 'flux-dev'];
    const started = await cli(start, { env, cwd: cliHost.cwd });
    expect(started.code, describeRun(start, started)).toBe(0);
    const stopped = await waitUntil(
      'the batch to stop on the worker of another store',
      async () => {
        const r = await cli(['status', 'other', '--json'], { env });
        const p = r.code === 0 ? (JSON.parse(r.stdout) as BatchProgress) : undefined;
        return p?.waiting?.kind === 'batch_stop' ? p.waiting.details.message : undefined;
      },
      60_000,
    );
    expect(stopped).toContain('IMAGEBATCH_LEDGER');
    expect(sim.charges.entries().length).toBe(before);
  });
});
