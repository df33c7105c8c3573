import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { batchWorkflow, batchWorkflowId, progressQuery, type BatchProgress } from '../../src/workflows';
import { idempotencyKeyFor } from '../../src/workflows/keys';
import { WorkerProcess, ensureDistIsFresh, rowOutcomes, sha256Of, waitUntil, within, writeBatchCsv } from './helpers';

/**
 * Crash test on the real server code: a 200-row batch on the SQLite-backed dev server, a worker child process
 * killed with SIGKILL mid-batch and replaced, and the dev server itself stopped and started again on its file
 * mid-batch. Every row must end exactly once, nothing may be charged twice, every image must be on disk with
 * its recorded checksum.
 */
const ROWS = 200;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let connection: Connection | undefined;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-crash-'));
  server = await DevServer.start({ dbFile: path.join(dir, 'temporal.sqlite'), uiPort: false });
  sim = await startSimulator({
    seed: 7,
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 600 } },
    limits: { minPollIntervalMs: 500, requestsPerSecond: 1000, burst: 1000 },
    faults: {
      probabilities: {
        [FaultKind.ResetAfterCommit]: 0.02,
        [FaultKind.InternalAfterCharge]: 0.02,
        [FaultKind.GenerationFailed]: 0.02,
        [FaultKind.FailGeneration]: 0.03,
        [FaultKind.ProviderUnavailable]: 0.01,
      },
      providerRetryAfterSeconds: 1,
    },
  });
  connection = await Connection.connect({ address: server.address });
});

afterAll(async () => {
  for (const w of workers) await w.kill();
  await connection?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function startWorker(taskQueue: string): Promise<WorkerProcess> {
  return WorkerProcess.start({
    outputRoot: dir,
    env: {
      TEMPORAL_ADDRESS: server!.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      IMAGEGEN_BASE_URL: sim!.baseUrl,
      IMAGEGEN_API_KEY: DEMO_API_KEY,
      IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
    },
  }).then((w) => {
    workers.push(w);
    return w;
  });
}

describe('a 200-row batch survives a killed worker and a restarted server', () => {
  it('ends every row exactly once, charges nothing twice, and keeps every image', async () => {
    const t0 = Date.now();
    const client = new Client({ connection: connection! });
    const taskQueue = `crash-${randomUUID()}`;
    const batchId = `crash${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    const outDir = path.join(dir, 'out');
    const rowIds = await writeBatchCsv(file, ROWS);

    let worker = await startWorker(taskQueue);
    const handle = await client.workflow.start(batchWorkflow, {
      taskQueue,
      workflowId: batchWorkflowId(batchId),
      args: [{ batchId, file, outDir, concurrency: 8, pageSize: 50 }],
    });
    const ended = (p: BatchProgress) => Object.values(p.counts).reduce((a, b) => a + b, 0);
    const progressAfter = (n: number, what: string) =>
      waitUntil(
        what,
        async () => {
          const p = await handle.query(progressQuery);
          return ended(p) >= n ? p : undefined;
        },
        60_000,
        100,
      );

    // A timeline for the log: every 2 s, rows ended / rows in flight (`-` when nobody answers the query).
    const samples: [number, string][] = [];
    const sampling = new Set<Promise<void>>();
    const sampler = setInterval(() => {
      const at = () => Math.round((Date.now() - t0) / 1000);
      const sample = handle.query(progressQuery).then(
        (p) => void samples.push([at(), `${at()}s:${ended(p)}/${p.inFlight}`]),
        () => void samples.push([at(), `${at()}s:-`]),
      );
      sampling.add(sample);
      void sample.finally(() => sampling.delete(sample));
    }, 2000);
    let progress: BatchProgress;
    try {
      progress = await killAndRestart();
    } finally {
      clearInterval(sampler);
      // No query may still be retrying when the connection closes.
      await Promise.allSettled([...sampling]);
    }
    const elapsed = Date.now() - t0;
    const timeline = samples.sort((a, b) => a[0] - b[0]).map(([, text]) => text);
    console.log(`[crash] timeline (ended/in flight): ${timeline.join(' ')}`);
    const retried = worker.output().match(/gRPC call \w+ retried/g)?.length ?? 0;
    console.log(`[crash] the second worker logged ${retried} gRPC call(s) retried while the server was down`);

    async function killAndRestart(): Promise<BatchProgress> {
      // 1. SIGKILL the worker once some rows have ended, and start a new one.
      const beforeKill = await progressAfter(8, '8 rows to end');
      expect(beforeKill.inFlight).toBeGreaterThan(0);
      await worker.kill();
      const killedAt = Date.now();
      worker = await startWorker(taskQueue);
      const readyMs = Date.now() - killedAt;
      const afterKill = await progressAfter(ended(beforeKill) + 1, 'a row to end after the kill');
      console.log(
        `[crash] killed the worker at ${ended(beforeKill)} rows ended (${beforeKill.inFlight} in flight); ` +
          `the new one polled after ${readyMs} ms and ended a row ${Date.now() - killedAt} ms after the kill`,
      );

      // 2. Stop the dev server (SIGTERM) mid-batch and start it again on the same SQLite file and port.
      const beforeRestart = await progressAfter(Math.max(100, ended(afterKill) + 10), '100 rows to end');
      const port = Number(server!.address.split(':').pop());
      await server!.stop();
      const downAt = Date.now();
      server = await DevServer.start({ dbFile: path.join(dir, 'temporal.sqlite'), uiPort: false, port });
      const upAt = Date.now();
      const firstAfterRestart = ended(await progressAfter(0, 'the batch to answer after the server restart'));
      const afterRestart = await progressAfter(firstAfterRestart + 8, 'rows to end after the server restart');
      console.log(
        `[crash] restarted the server at ${ended(beforeRestart)} rows ended (down ${upAt - downAt} ms); ` +
          `${ended(afterRestart) - firstAfterRestart} more rows ended within ${Date.now() - upAt} ms after it was up`,
      );

      return within('the batch', 150_000, handle.result()).catch((err: unknown) => {
        throw new Error(`${String(err)}\nworker output:\n${worker.output()}`);
      });
    }

    // The second worker lived through the server restart: it reconnected by itself.
    expect(worker.running).toBe(true);
    expect(workers).toHaveLength(2);

    // Every row in exactly one final state.
    expect(progress.done).toBe(true);
    expect(progress.rowsRead).toBe(ROWS);
    expect(progress.started).toBe(ROWS);
    expect(ended(progress)).toBe(ROWS);
    expect(progress.inFlight).toBe(0);
    const rows = await rowOutcomes(client, batchId, rowIds);
    expect(rows.filter((r) => r.status !== 'COMPLETED')).toEqual([]);
    const byState: Record<string, number> = {};
    for (const r of rows) byState[r.result!.state] = (byState[r.result!.state] ?? 0) + 1;
    expect(byState).toEqual(Object.fromEntries(Object.entries(progress.counts).filter(([, n]) => n > 0)));
    expect(progress.counts.succeeded).toBeGreaterThan(ROWS * 0.9);

    // Nothing charged twice, and each row's own accounting matches the service's ledger.
    expect(sim!.ledger.violations()).toEqual({
      chargedTwice: [],
      overchargedCreations: [],
      unrefundedFailures: [],
      chargesWithoutCreation: [],
    });
    const byKey = new Map(sim!.ledger.byIdempotencyKey().map((s) => [s.idempotencyKey, s]));
    for (const { rowId, result } of rows) {
      const keys = result!.attempts.map((_, i) => idempotencyKeyFor(batchId, rowId, i + 1));
      const netCharged = keys.reduce((n, k) => n + (byKey.get(k)?.netCharged ?? 0), 0);
      const netUsd = keys.reduce((n, k) => n + (byKey.get(k)?.netUsd ?? 0), 0);
      if (result!.state === 'succeeded') expect({ rowId, netCharged }).toEqual({ rowId, netCharged: 1 });
      else expect(netCharged, rowId).toBeLessThanOrEqual(1);
      expect(netUsd, rowId).toBeCloseTo(result!.chargedUsd - result!.refundedUsd, 6);
    }
    // No key beyond the attempts the rows recorded was ever used.
    const rowKeys = new Set(
      rows.flatMap(({ rowId, result }) => result!.attempts.map((_, i) => idempotencyKeyFor(batchId, rowId, i + 1))),
    );
    expect([...byKey.keys()].filter((k) => !rowKeys.has(k))).toEqual([]);

    // Every image on disk with its recorded checksum.
    let images = 0;
    for (const { result } of rows) {
      if (result!.state !== 'succeeded') continue;
      expect(result!.images.length).toBeGreaterThan(0);
      for (const image of result!.images) {
        const onDisk = path.join(outDir, image.path);
        expect(existsSync(onDisk), onDisk).toBe(true);
        expect(await sha256Of(onDisk)).toBe(image.sha256);
        images += 1;
      }
    }
    const attempts = rows.reduce((n, r) => n + r.result!.attempts.length, 0);
    const durations = rows.map((r) => r.durationMs ?? 0).sort((a, b) => a - b);
    const at = (q: number) => durations[Math.min(durations.length - 1, Math.floor(q * durations.length))]!;
    console.log(
      `[crash] ${ROWS} rows in ${(elapsed / 1000).toFixed(1)} s over ${progress.runs} run(s): ` +
        `${JSON.stringify(progress.counts)}, ${attempts} attempts, ${images} images checked, ` +
        `${sim!.ledger.byIdempotencyKey().length} keys charged, spent ${progress.spentUsd} USD; row time ms ` +
        `median ${at(0.5)}, p95 ${at(0.95)}, max ${at(1)}`,
    );
  }, 240_000);
});
