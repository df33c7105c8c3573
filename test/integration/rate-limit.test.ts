import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { batchWorkflow, batchWorkflowId } from '../../src/workflows';
import {
  WorkerProcess,
  ensureDistIsFresh,
  startCountingProxy,
  within,
  writeBatchCsv,
  type CountingProxy,
} from './helpers';

/**
 * The task-queue rate limit (IMAGEBATCH_RATE_LIMIT), enforced by the Temporal server across every worker of the
 * queue, keeps the worker under the service's per-key request rate: almost no 429. The time-skipping server does
 * not enforce task-queue rate limits, hence the dev server. The simulator keeps no count of its answers, so a
 * proxy in front of it counts them.
 */
const ROWS = 40;
const SERVICE_RATE = 5;
const WORKER_RATE = 4;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let proxy: CountingProxy | undefined;
let connection: Connection | undefined;
let worker: WorkerProcess | undefined;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-rate-'));
  server = await DevServer.start({ uiPort: false });
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 600 } },
    limits: { minPollIntervalMs: 500, requestsPerSecond: SERVICE_RATE, burst: SERVICE_RATE },
  });
  proxy = await startCountingProxy(sim.baseUrl);
  connection = await Connection.connect({ address: server.address });
});

afterAll(async () => {
  await worker?.kill();
  await connection?.close();
  await proxy?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the task-queue rate limit on the dev server', () => {
  it(`${WORKER_RATE} activities/s keeps a ${SERVICE_RATE} req/s key almost free of 429s`, async () => {
    const client = new Client({ connection: connection! });
    const taskQueue = `rate-${randomUUID()}`;
    const batchId = `rate${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    await writeBatchCsv(file, ROWS);
    worker = await WorkerProcess.start({
      outputRoot: dir,
      env: {
        TEMPORAL_ADDRESS: server!.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        IMAGEBATCH_RATE_LIMIT: String(WORKER_RATE),
        IMAGEGEN_BASE_URL: proxy!.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
      },
    });
    const t0 = Date.now();
    const progress = await within(
      'the batch',
      90_000,
      client.workflow.execute(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [{ batchId, file, outDir: 'out', concurrency: 8 }],
      }),
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nworker output:\n${worker?.output() ?? ''}`);
    });
    const seconds = (Date.now() - t0) / 1000;

    const requests = proxy!.total();
    const tooMany = proxy!.statuses.get(429) ?? 0;
    console.log(
      `[rate-limit] ${ROWS} rows in ${seconds.toFixed(1)} s: ${requests} requests ` +
        `(${(requests / seconds).toFixed(2)}/s against a limit of ${SERVICE_RATE}/s, worker at ${WORKER_RATE}/s), ` +
        `${tooMany} answered 429 (${((tooMany / requests) * 100).toFixed(2)}%` +
        `${tooMany ? `: ${JSON.stringify(Object.fromEntries(proxy!.tooManyByReason))}` : ''}); ` +
        `statuses ${JSON.stringify(Object.fromEntries(proxy!.statuses))}`,
    );
    expect(progress.counts.succeeded).toBe(ROWS);
    expect(requests).toBeGreaterThanOrEqual(2 * ROWS);
    expect(tooMany).toBeLessThanOrEqual(requests * 0.01);
    expect(sim!.ledger.violations().chargedTwice).toEqual([]);
  }, 150_000);
});
