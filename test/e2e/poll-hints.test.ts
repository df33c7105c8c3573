import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import type { BatchProgress } from '../../src/model';
import { POLL_HINT_PROFILE, startSimulator, type Simulator } from '../../src/simulator';
import { progressQuery } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Issue #42, point 6: a service whose minimum poll interval (3 s) is longer than imagebatch's default (2 s), and whose
 * every answer to a poll of a creation still in flight says `Retry-After`. The tester, whose worker was killed
 * mid-batch, saw 4 to 5% of polls come too early (429). Here the worker stops with its window of creations polled, and
 * another starts 5 s later, knowing nothing of the service: the polls that fell due meanwhile go out together. With the default
 * settings, the share of polls the simulator refused as sooner than its interval (`min_poll_interval`) stays under 1%.
 */
const env = useTestEnv(() => createLocalEnv());
const ROWS = 40;
const CONCURRENCY = 20;
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-hints-'));
  sim = await startSimulator({
    ...POLL_HINT_PROFILE,
    // Running 6 to 12 s: each creation is polled three or four times, 3 s apart.
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 6_000, maxMs: 12_000 } },
    limits: { ...POLL_HINT_PROFILE.limits, requestsPerSecond: 500, burst: 500, accountConcurrency: null },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a batch against the poll-hint profile, default settings', { timeout: 300_000 }, () => {
  it(`${ROWS} rows, the worker replaced mid-batch: under 1% of polls too soon for the interval`, async () => {
    const file = path.join(dir, 'prompts.csv');
    const lines = Array.from({ length: ROWS }, (_, i) => `r${i},"a tram in the rain at night, study ${i}"`);
    await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
    // The default poll interval (the helper's is 200 ms, for speed).
    const config = { minPollIntervalMs: 2_000 };
    const first = await simulatorWorker(env, { baseUrl: sim.baseUrl, outputRoot: dir, prefix: 'hints', config });
    const { taskQueue, ledger } = first;
    const handle = await first.worker.runUntil(async () => {
      const started = await startOrAttachBatch({
        ledger,
        client: env().client,
        taskQueue,
        batchId: `h${randomUUID().slice(0, 8)}`,
        file,
        outDir: path.join(dir, 'out'),
        defaultModel: 'flux-dev',
        concurrency: CONCURRENCY,
      });
      // Once the canary passed and the window is full, its creations are polled a while; then this worker stops.
      for (let i = 0; i < 600; i++) {
        const p: BatchProgress = await started.handle.query(progressQuery);
        if (p.inFlight >= CONCURRENCY || p.done) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 4_000));
      return started.handle;
    });
    await new Promise((r) => setTimeout(r, 5_000));
    const second = await simulatorWorker(env, {
      ...{ baseUrl: sim.baseUrl, outputRoot: dir, prefix: 'hints', config, taskQueue, ledger },
    });
    const progress = await second.worker.runUntil(handle.result());
    expect(progress.counts).toMatchObject({ succeeded: ROWS });
    const { polls, pollsTooSoon } = sim.stats();
    const share = pollsTooSoon / polls;
    console.log(`polls: ${polls}, too soon: ${pollsTooSoon} (${(100 * share).toFixed(2)}%)`);
    expect(polls).toBeGreaterThanOrEqual(2 * ROWS);
    expect(share, `${pollsTooSoon} of ${polls} polls came sooner than the interval`).toBeLessThan(0.01);
  });
});
