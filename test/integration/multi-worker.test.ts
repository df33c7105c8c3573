import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MetricName, ResponseClass } from '../../src/metrics';
import { batchWorkflowId, parseIdempotencyKey } from '../../src/model';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { freePort } from '../../src/util/net';
import { batchWorkflow } from '../../src/workflows';
import { scrape, sumOf } from '../metrics/prometheus';
import {
  WorkerProcess,
  ensureDistIsFresh,
  startCountingProxy,
  within,
  writeBatchCsv,
  type CountingProxy,
} from './helpers';

/**
 * Scaling out on one machine: three worker processes poll one task queue, and the task-queue rate limit
 * (IMAGEBATCH_RATE_LIMIT, enforced by the Temporal server for all of them together) keeps their sum under the
 * image service's per-key rate. A proxy counts every answer on the wire; each worker's metrics endpoint says what
 * that worker did, and the sums must agree with the wire.
 */
const WORKERS = 3;
const ROWS = 120;
const SERVICE_RATE = 10;
const QUEUE_RATE = 9;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let proxy: CountingProxy | undefined;
let connection: Connection | undefined;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-multi-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 600 } },
    // The per-key rate limit is the constraint under test, not the account's concurrency.
    limits: { minPollIntervalMs: 500, requestsPerSecond: SERVICE_RATE, burst: SERVICE_RATE, accountConcurrency: null },
  });
  proxy = await startCountingProxy(sim.baseUrl);
  connection = await Connection.connect({ address: server.address });
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await connection?.close();
  await proxy?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe(`${WORKERS} workers on one task queue`, () => {
  it(`share a ${QUEUE_RATE}/s queue rate limit under a ${SERVICE_RATE} req/s key: at most 1% 429s, all work`, async () => {
    const client = new Client({ connection: connection! });
    const taskQueue = `multi-${randomUUID()}`;
    const batchId = `multi${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    const rowIds = await writeBatchCsv(file, ROWS);
    const metricsAddresses: string[] = [];
    for (let i = 0; i < WORKERS; i++) {
      const metricsAddress = `127.0.0.1:${await freePort()}`;
      metricsAddresses.push(metricsAddress);
      workers.push(
        await WorkerProcess.start({
          outputRoot: dir,
          readyTimeoutMs: 120_000,
          env: {
            TEMPORAL_ADDRESS: server!.address,
            TEMPORAL_TASK_QUEUE: taskQueue,
            IMAGEBATCH_RATE_LIMIT: String(QUEUE_RATE),
            IMAGEBATCH_METRICS_ADDRESS: metricsAddress,
            IMAGEGEN_BASE_URL: proxy!.baseUrl,
            IMAGEGEN_API_KEY: DEMO_API_KEY,
            IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
          },
        }),
      );
    }

    const t0 = Date.now();
    const progress = await within(
      'the batch',
      240_000,
      client.workflow.execute(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [{ batchId, file, outDir: 'out', concurrency: 16 }],
      }),
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${workers.map((w, i) => `worker ${i + 1}:\n${w.output()}`).join('\n')}`);
    });
    const seconds = (Date.now() - t0) / 1000;

    const perWorker = await Promise.all(
      metricsAddresses.map(async (address) => {
        const samples = await scrape(address);
        const count = (cls: ResponseClass) => sumOf(samples, MetricName.ApiRequests, { class: cls });
        return {
          sent: count(ResponseClass.Success) + count(ResponseClass.ClientError) + count(ResponseClass.ServerError),
          submitted: sumOf(samples, MetricName.Charges),
          polls: sumOf(samples, MetricName.ApiRequests, { kind: 'poll' }),
          tooMany: sumOf(samples, MetricName.TooManyRequests),
          localHolds: count(ResponseClass.LocalHold),
        };
      }),
    );
    const requests = proxy!.total();
    const tooMany = proxy!.statuses.get(429) ?? 0;
    console.log(
      `[multi-worker] ${WORKERS} workers, ${ROWS} rows in ${seconds.toFixed(1)} s (${(ROWS / seconds).toFixed(2)} rows/s): ` +
        `${requests} requests (${(requests / seconds).toFixed(2)}/s against a key limit of ${SERVICE_RATE}/s, queue ` +
        `limit ${QUEUE_RATE}/s), ${tooMany} answered 429 (${((tooMany / requests) * 100).toFixed(2)}%` +
        `${tooMany ? `: ${JSON.stringify(Object.fromEntries(proxy!.tooManyByReason))}` : ''}); per worker ` +
        perWorker
          .map((w, i) => `#${i + 1}: ${w.submitted} rows submitted, ${w.polls} polls, ${w.sent} requests sent`)
          .join('; '),
    );

    expect(progress.counts.succeeded).toBe(ROWS);
    expect(tooMany).toBeLessThanOrEqual(requests * 0.01);
    // Every worker took part, and together they sent exactly what the wire carried.
    for (const w of perWorker) {
      expect(w.submitted).toBeGreaterThan(0);
      expect(w.polls).toBeGreaterThan(0);
    }
    expect(perWorker.reduce((a, w) => a + w.sent, 0)).toBe(requests);
    expect(perWorker.reduce((a, w) => a + w.submitted, 0)).toBe(ROWS);
    // One net charge per row, none twice.
    const netCharges = new Map<string, number>();
    for (const s of sim!.charges.byIdempotencyKey()) {
      const rowId = parseIdempotencyKey(s.idempotencyKey)?.rowId;
      if (rowId !== undefined) netCharges.set(rowId, (netCharges.get(rowId) ?? 0) + s.netCharged);
    }
    expect(rowIds.filter((id) => netCharges.get(id) !== 1)).toEqual([]);
    expect(sim!.charges.violations().chargedTwice).toEqual([]);
  }, 420_000);
});
