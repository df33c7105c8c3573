import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { REPO_ROOT, baseEnv, cli, describeRun, ensureDistIsFresh, waitUntil, type CliResult } from '../cli/helpers';
import { chargesOf, expectEveryRowFinal, expectNothingPaidTwice } from '../helpers/batch-checks';
import { WorkerProcess } from '../helpers/worker-process';
import { startCountingProxy, type CountingProxy } from '../integration/helpers';

/**
 * imagebatch on a real Temporal cluster: PostgreSQL, and frontend, history, matching and worker as separate
 * processes (`scripts/cluster.mjs --split`, the server settings and dynamic config docker-compose.yml gives its
 * server container). Three `imagebatch worker` processes and the CLI read their Temporal settings from a
 * temporal.toml profile, as users do. A 300-row batch runs against the simulator with a per-key rate limit; in the
 * middle the history service is SIGKILLed and started again, and one worker is SIGKILLed. Every row must end with
 * its record, nothing be paid twice, and the task-queue rate limit (enforced by matching for all workers together)
 * keep the key under its limit. Only `npm run test:cluster` runs this file (its own vitest project).
 */

const ROWS = 300;
const WORKERS = 3;
/** The key's limit: a token bucket of this rate and burst. */
const KEY_RATE = 20;
const KEY_BURST = 20;
/**
 * The task queue's rate (IMAGEBATCH_RATE_LIMIT), under the key's, as docs/scaling.md advises. Matching lets bursts
 * through (the busiest second reached 44 requests): at the key's own rate five runs gave 0 % to 0.81 % of 429s, at
 * 18/s three runs 0 %, 0.98 % and 0 %, too near the 1 % bound for CI; at 15/s 0 %, 0 % and 0.59 % (2026-11-24).
 */
const QUEUE_RATE = 15;
/**
 * Each worker's own pacer (IMAGEGEN_CLIENT_RATE_PER_SEC, IMAGEGEN_CLIENT_RATE_BURST): the key's rate and burst shared
 * out between the workers, under both. Matching's limiter lets bursts through after the history service restarts
 * (runs on 2026-11-24 met 2, 8, 10 and 17 429s, up to 2.6%, the busiest second at the bucket's 40); the pacers
 * smooth what reaches the key, as docs/scaling.md advises.
 */
const WORKER_RATE = Math.floor((KEY_RATE * 0.9) / WORKERS);
const WORKER_BURST = Math.floor(KEY_BURST / WORKERS);
const MIN_POLL_MS = 500;
const TASK_QUEUE = 'imagebatch-cluster-test';
const CLUSTER_SCRIPT = path.join(REPO_ROOT, 'scripts', 'cluster.mjs');

let dir: string;
let clusterDir: string;
let clusterUp = false;
let sim: Simulator | undefined;
let proxy: CountingProxy | undefined;
/** Temporal settings of the workers and the CLI: a profile file, no TEMPORAL_ADDRESS. */
let temporalEnv: Record<string, string>;
const workers: WorkerProcess[] = [];

/** `node scripts/cluster.mjs ...args`, bounded; rejects with its output when it fails. */
function cluster(args: readonly string[], timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLUSTER_SCRIPT, ...args, '--dir', clusterDir],
      { cwd: REPO_ROOT, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err)
          reject(new Error(`cluster.mjs ${args.join(' ')}: ${err.message}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

/** `cluster.mjs --status`: the processes, with their pids and whether they run. */
async function clusterStatus(): Promise<{ processes: Record<string, { pid: number; running: boolean }> }> {
  return JSON.parse(await cluster(['--status'])) as { processes: Record<string, { pid: number; running: boolean }> };
}

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cluster-test-'));
  clusterDir = path.join(dir, 'cluster');
  clusterUp = true; // from here on, afterAll brings down whatever part of it started
  const address = (await cluster(['--split'])).trim().split('\n').at(-1)!;
  expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
  const profileFile = path.join(dir, 'temporal.toml');
  await writeFile(profileFile, `[profile.cluster]\naddress = "${address}"\nnamespace = "default"\n`);
  // The ledger store: a database of its own on the cluster's PostgreSQL, for every worker and command.
  const { ledger } = JSON.parse(await readFile(path.join(clusterDir, 'cluster.json'), 'utf8')) as {
    ledger: { url: string; passwordFile: string };
  };
  temporalEnv = {
    IMAGEBATCH_LEDGER: ledger.url,
    IMAGEBATCH_LEDGER_PASSWORD_FILE: ledger.passwordFile,
    TEMPORAL_CONFIG_FILE: profileFile,
    TEMPORAL_PROFILE: 'cluster',
    TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    // Never a local server, whatever the profile says.
    IMAGEBATCH_LOCAL: 'off',
  };
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 100, maxMs: 300 }, runningMs: { minMs: 500, maxMs: 1_500 } },
    // The per-key rate limit is the constraint under test, not the account's concurrency.
    limits: { requestsPerSecond: KEY_RATE, burst: KEY_BURST, minPollIntervalMs: MIN_POLL_MS, accountConcurrency: null },
  });
  proxy = await startCountingProxy(sim.baseUrl);
  for (let i = 0; i < WORKERS; i++) {
    workers.push(
      await WorkerProcess.start({
        outputRoot: dir,
        readyTimeoutMs: 120_000,
        env: {
          ...temporalEnv,
          IMAGEBATCH_RATE_LIMIT: String(QUEUE_RATE),
          IMAGEGEN_CLIENT_RATE_PER_SEC: String(WORKER_RATE),
          IMAGEGEN_CLIENT_RATE_BURST: String(WORKER_BURST),
          IMAGEGEN_BASE_URL: proxy.baseUrl,
          IMAGEGEN_API_KEY: DEMO_API_KEY,
          IMAGEGEN_MIN_POLL_INTERVAL_MS: String(MIN_POLL_MS),
        },
      }),
    );
  }
}, 300_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  if (clusterUp) await cluster(['--down'], 120_000).catch((err: unknown) => console.error(String(err)));
  await proxy?.close();
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 180_000);

function cliEnv(): { env: Record<string, string> } {
  return { env: baseEnv(temporalEnv) };
}

/** Most requests that reached the service within any 1 s window. */
function busiestSecond(arrivals: readonly number[]): number {
  let most = 0;
  let from = 0;
  for (let to = 0; to < arrivals.length; to++) {
    while (arrivals[to]! - arrivals[from]! >= 1_000) from++;
    most = Math.max(most, to - from + 1);
  }
  return most;
}

function workerLogs(): string {
  return workers.map((w, i) => `worker ${i + 1}:\n${w.output().slice(-3_000)}`).join('\n');
}

describe('on a split Temporal cluster on PostgreSQL', () => {
  it(`a ${ROWS}-row batch survives SIGKILL of the history service and of a worker: every row final, nothing paid twice, the key under its limit`, async () => {
    const batchId = 'cluster300';
    const file = path.join(dir, `${batchId}.csv`);
    const lines = Array.from(
      { length: ROWS },
      (_, i) => `r${String(i + 1).padStart(3, '0')},a lighthouse number ${i + 1}`,
    );
    await writeFile(file, ['id,prompt', ...lines].join('\n') + '\n');
    const outDir = path.join(dir, 'out');
    const args = ['run', file, '--model', 'flux-dev', '--out', outDir, '--concurrency', '48', '--follow', '--json'];
    const t0 = Date.now();
    // In the background: the kills happen while it follows (it waits out UNAVAILABLE while history restarts).
    const running: Promise<CliResult | Error> = cli(args, { ...cliEnv(), timeoutMs: 480_000 }).catch((e: Error) => e);
    const charged = () => chargesOf(sim!, batchId).perKey.size;

    await waitUntil('80 charges', async () => (charged() >= 80 ? true : undefined), 180_000, 100);
    const history = async () => (await clusterStatus()).processes.history!;
    const before = await history();
    await cluster(['--kill', 'history']);
    const killedHistoryAt = charged();
    expect((await history()).running).toBe(false);
    await sleep(5_000);
    await cluster(['--restart', 'history']);
    const after = await history();
    expect(after.running && after.pid !== before.pid).toBe(true);
    await waitUntil(
      'charges after the restart',
      async () => (charged() >= killedHistoryAt + 40 ? true : undefined),
      180_000,
      100,
    );
    await workers[0]!.kill();
    const killedWorkerAt = charged();
    expect(killedWorkerAt).toBeLessThan(ROWS);

    const result = await running;
    const seconds = (Date.now() - t0) / 1000;
    if (result instanceof Error) throw new Error(`${result.message}\n${workerLogs()}`);
    expect(result.code, `${describeRun(args, result)}\n${workerLogs()}`).toBe(0);
    const final = JSON.parse(result.stdout) as { done: boolean; counts: Record<string, number> };
    expect(final.done).toBe(true);

    const written = await cli(['results', batchId, '--json'], cliEnv());
    expect(written.code, describeRun(['results', batchId, '--json'], written)).toBe(0);
    const records = await expectEveryRowFinal(outDir, ROWS);
    const ok = records.filter((r) => r.state === 'succeeded').length;
    expectNothingPaidTwice(sim!, batchId);
    const { perKey, keptPerRow } = chargesOf(sim!, batchId);
    const doubleCharges =
      [...perKey.values()].filter((n) => n > 1).length + [...keptPerRow.values()].filter((n) => n > 1).length;

    const requests = proxy!.total();
    const tooMany = proxy!.statuses.get(429) ?? 0;
    const busiest = busiestSecond(proxy!.arrivals);
    const rate = requests / seconds;
    console.log(
      [
        '',
        '| rows | ok | wall time | requests | requests/s (queue limit, key limit) | busiest 1 s (limit + burst) | 429s | kills survived | double charges |',
        '| ---: | ---: | ---: | ---: | ---: | ---: | :--- | :--- | ---: |',
        `| ${ROWS} | ${ok} | ${seconds.toFixed(1)} s | ${requests} | ${rate.toFixed(2)} (${QUEUE_RATE}, ${KEY_RATE}) | ${busiest} (${KEY_RATE + KEY_BURST}) | ` +
          `${tooMany} (${((tooMany / requests) * 100).toFixed(2)} %${tooMany ? ` ${JSON.stringify(Object.fromEntries(proxy!.tooManyByReason))}` : ''}) | ` +
          `history at ${killedHistoryAt} charges, worker at ${killedWorkerAt} | ${doubleCharges} |`,
        '',
      ].join('\n'),
    );

    expect(ok).toBe(ROWS);
    // The rate limit holds across matching's partitions if the key's own limiter, a token bucket of KEY_RATE and
    // KEY_BURST, seldom has to refuse: it answers 429 to every request above the bucket, so at most 1 % of 429s.
    // The busiest second is printed, not asserted: matching's limiter has a burst of its own, and a worker's
    // Retry-After hold releases requests together, so a second can reach the bucket's rate plus its burst (it did,
    // 40 of 40) with every request above it refused and counted here.
    expect(tooMany).toBeLessThanOrEqual(requests * 0.01);
  }, 600_000);

  it('a batch with 128-character batch and row ids completes on the cluster', async () => {
    const batchId = `b${'x'.repeat(126)}1`;
    const rowIds = [1, 2, 3].map((n) => `r${'y'.repeat(126)}${n}`);
    expect([batchId, ...rowIds].every((id) => id.length === 128)).toBe(true);
    const file = path.join(dir, 'long-ids.csv');
    await writeFile(file, ['id,prompt', ...rowIds.map((id, i) => `${id},a long id number ${i + 1}`)].join('\n') + '\n');
    const outDir = path.join(dir, 'out-long');
    const args = ['run', file, '--batch-id', batchId, '--model', 'flux-dev', '--out', outDir, '--follow', '--json'];
    const before = sim!.charges.entries().filter((e) => e.kind === 'charge').length;
    const r = await cli(args, { ...cliEnv(), timeoutMs: 180_000 });
    expect(r.code, `${describeRun(args, r)}\n${workerLogs()}`).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ batchId, done: true, counts: { succeeded: 3 } });
    const written = await cli(['results', batchId, '--json'], cliEnv());
    expect(written.code, describeRun(['results', batchId], written)).toBe(0);
    const records = await expectEveryRowFinal(outDir, 3);
    expect(records.map((x) => [x.row_id, x.state])).toEqual(rowIds.map((id) => [id, 'succeeded']));
    expect(sim!.charges.entries().filter((e) => e.kind === 'charge').length - before).toBe(3);
    expect(sim!.charges.chargedTwice()).toEqual([]);
  }, 240_000);
});
