import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchWorkflowId, FailureType } from '../../src/model';
import { MetricName } from '../../src/metrics';
import { CreationOutcome, DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { freePort } from '../../src/util/net';
import { batchWorkflow } from '../../src/workflows';
import {
  WorkerProcess,
  ensureDistIsFresh,
  startCountingProxy,
  within,
  type CountingProxy,
} from '../integration/helpers';
import { byLabel, scrape, sumOf, type Sample } from './prometheus';

/**
 * The worker's Prometheus endpoint (IMAGEBATCH_METRICS_ADDRESS): a real worker process runs a batch whose rows meet
 * scripted faults and the simulator's per-key rate limit, and its counters must equal what a proxy saw on the wire
 * and what the simulator's charge book recorded; the Temporal runtime's own metrics are served beside them.
 */
const NORMAL_ROWS = 10;
/** Prompt markers and the fault each one's first submission meets. */
const FAULTS: Record<string, FaultKind> = {
  'marker-502': FaultKind.GenerationFailed,
  'marker-503': FaultKind.ProviderUnavailable,
  'marker-500': FaultKind.InternalAfterCharge,
  'marker-reset': FaultKind.ResetAfterCommit,
  'marker-safety': FaultKind.FailSafety,
  'marker-retry': FaultKind.FailGeneration,
};
const ROWS = NORMAL_ROWS + Object.keys(FAULTS).length;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let proxy: CountingProxy | undefined;
let connection: Connection | undefined;
let worker: WorkerProcess | undefined;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-metrics-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  sim = await startSimulator({
    // Long enough that some polls find a creation still running (Pending retries).
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 1500, maxMs: 2500 } },
    // A small per-key bucket that the first window of submissions overruns: some 429s, on purpose.
    limits: { minPollIntervalMs: 500, requestsPerSecond: 4, burst: 4, accountConcurrency: null },
    faults: { providerRetryAfterSeconds: 1 },
  });
  for (const [marker, kind] of Object.entries(FAULTS)) sim.scriptFor(marker, [kind]);
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

describe('the worker metrics endpoint', () => {
  it('counts requests, 429s, charges, refunds and retries as the wire and the ledger saw them', async () => {
    const client = new Client({ connection: connection! });
    const taskQueue = `metrics-${randomUUID()}`;
    const batchId = `metrics${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    const prompts = [
      ...Array.from({ length: NORMAL_ROWS }, (_, i) => `a watercolour harbour at dawn, number ${i + 1}`),
      ...Object.keys(FAULTS).map((marker) => `a watercolour harbour at dusk, ${marker}`),
    ];
    await writeFile(file, `id,prompt,model\n${prompts.map((p, i) => `r${i + 1},"${p}",sdxl`).join('\n')}\n`);
    const metricsAddress = `127.0.0.1:${await freePort()}`;
    worker = await WorkerProcess.start({
      outputRoot: dir,
      env: {
        TEMPORAL_ADDRESS: server!.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        IMAGEGEN_BASE_URL: proxy!.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
        IMAGEBATCH_METRICS_ADDRESS: metricsAddress,
      },
    });
    expect(worker.output()).toContain(`metrics on http://${metricsAddress}/metrics`);

    const progress = await within(
      'the batch',
      120_000,
      client.workflow.execute(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [{ batchId, file, outDir: 'out', concurrency: ROWS }],
      }),
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nworker output:\n${worker?.output() ?? ''}`);
    });
    expect(progress.counts.succeeded).toBe(ROWS - 1);
    expect(progress.counts.failed).toBe(1); // the safety filter's

    const samples = await scrape(metricsAddress);
    const requests = byLabel(samples, MetricName.ApiRequests, 'class');
    const wire = wireByClass(proxy!.statuses);
    const tooMany = proxy!.statuses.get(429) ?? 0;
    console.log(
      `[metrics] requests by class ${JSON.stringify(requests)}; wire ${JSON.stringify(wire)}, 429 ${tooMany} ` +
        `${JSON.stringify(Object.fromEntries(proxy!.tooManyByReason))}; retries ` +
        `${JSON.stringify(byLabel(samples, MetricName.ActivityRetries, 'reason'))}; ` +
        `temporal_* series ${samples.filter((s) => s.name.startsWith('temporal_')).length}`,
    );

    // Every answer the wire carried, by class; the reset never reached the proxy as an answer.
    for (const cls of ['2xx', '4xx', '5xx'] as const) expect(requests[cls] ?? 0, cls).toBe(wire[cls]);
    expect(requests.other ?? 0).toBe(wire.other);
    expect(requests.transport).toBe(1);
    expect(requests.unclassified ?? 0).toBe(0);
    expect(tooMany).toBeGreaterThan(0);
    expect(byLabel(samples, MetricName.TooManyRequests, 'reason')).toEqual(Object.fromEntries(proxy!.tooManyByReason));
    expect(sumOf(samples, MetricName.ApiRequests, { kind: 'submit', class: '5xx' })).toBe(3); // 502, 503, 500

    // Charges and refunds against the ledger: a creation charged and not refused is one accepted submission.
    const creations = sim!.charges.byCreation();
    const accepted = creations.filter((c) => c.outcome !== CreationOutcome.Rejected);
    expect(sumOf(samples, MetricName.Charges)).toBe(accepted.length);
    const micros = accepted.reduce((a, c) => a + Math.round(c.chargedUsd * 1_000_000), 0);
    expect(sumOf(samples, MetricName.ChargedMicroUsd)).toBe(micros);
    const refunds = byLabel(samples, MetricName.Refunds, 'reason');
    expect(refunds).toEqual({
      refused_submission: creations.filter((c) => c.outcome === CreationOutcome.Rejected).length,
      failed_creation: creations.filter((c) => c.outcome === CreationOutcome.Failed).length,
    });
    expect(refunds).toEqual({ refused_submission: 2, failed_creation: 2 });
    const ledgerRefunds = sim!.charges.entries().filter((e) => e.kind === 'refund').length;
    expect((refunds.refused_submission ?? 0) + (refunds.failed_creation ?? 0)).toBe(ledgerRefunds);

    // Retries by reason: every 429 and local hold is a RateLimited retry, every 500 and reset an Ambiguous one.
    const retries = (reason: string) => sumOf(samples, MetricName.ActivityRetries, { reason });
    expect(retries(FailureType.RateLimited)).toBe(tooMany + (requests.local_hold ?? 0));
    expect(retries(FailureType.Ambiguous)).toBe((proxy!.statuses.get(500) ?? 0) + 1);
    expect(retries(FailureType.Pending)).toBeGreaterThan(0);

    // The Temporal runtime's own metrics share the endpoint; ours carry the same worker labels.
    const ours = samples.filter((s) => s.name === MetricName.ApiRequests);
    expect(ours.every((s) => s.labels.task_queue === taskQueue && s.labels.namespace === 'default')).toBe(true);
    expect(runtimeMetric(samples, 'temporal_activity_execution_latency')).toBe(true);
    expect(runtimeMetric(samples, 'temporal_workflow_completed')).toBe(true);
    expect(runtimeMetric(samples, 'temporal_worker_task_slots_available')).toBe(true);
  }, 200_000);
});

describe('a wrong metrics setting', () => {
  it('stops the worker at start with the variable named: not host:port, or a port already taken', async () => {
    const env = { TEMPORAL_ADDRESS: server!.address, IMAGEGEN_API_KEY: DEMO_API_KEY };
    await expect(WorkerProcess.start({ env: { ...env, IMAGEBATCH_METRICS_ADDRESS: '9464' } })).rejects.toThrow(
      /IMAGEBATCH_METRICS_ADDRESS: must be host:port/,
    );
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    try {
      const address = `127.0.0.1:${(taken.address() as AddressInfo).port}`;
      await expect(WorkerProcess.start({ env: { ...env, IMAGEBATCH_METRICS_ADDRESS: address } })).rejects.toThrow(
        `IMAGEBATCH_METRICS_ADDRESS: cannot serve metrics on ${address}`,
      );
    } finally {
      taken.close();
    }
  }, 60_000);
});

/** The proxy's answers grouped like the worker's response classes. */
function wireByClass(statuses: ReadonlyMap<number, number>): Record<'2xx' | '4xx' | '5xx' | 'other', number> {
  const out = { '2xx': 0, '4xx': 0, '5xx': 0, other: 0 };
  for (const [status, n] of statuses) {
    const cls =
      status >= 200 && status < 300 ? '2xx' : status >= 400 && status < 500 ? '4xx' : status >= 500 ? '5xx' : 'other';
    out[cls] += n;
  }
  return out;
}

function runtimeMetric(samples: readonly Sample[], prefix: string): boolean {
  return samples.some((s) => s.name.startsWith(prefix));
}
