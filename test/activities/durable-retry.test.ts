import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { activityInfo, ApplicationFailure, heartbeat } from '@temporalio/activity';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createActivitiesWithSteps } from '../../src/activities';
import { ErrorCode } from '../../src/api/contract';
import { FailureType } from '../../src/model';
import { defaultServiceConfig } from '../../src/config/service-config';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { createTimeSkippingEnv, useTestEnv } from '../helpers/temporal';
import { capturingLogger } from './helpers';
import { createImageWorkflow, pollWorkflow, probeHeartbeatWorkflow, submitWorkflow } from './fixtures/workflows';
import { lazyTempLedger } from '../helpers/ledger';

/**
 * The retry mechanics the activities rely on, measured on the time-skipping test server: heartbeat details
 * survive a failed attempt (so the count of unknown outcomes is durable), and `nextRetryDelay` is the wait.
 */

const noop = () => undefined;
let bundle: WorkflowBundleWithSourceMap;
const env = useTestEnv(createTimeSkippingEnv);
beforeAll(async () => {
  bundle = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, 'fixtures', 'workflows.ts'),
    logger: { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop },
  });
});

const servers: StubServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function runWith<T>(activities: object, run: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = `act-${randomUUID()}`;
  const worker = await Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities,
  });
  return worker.runUntil(run(taskQueue));
}

/** The real activities on a stub; the fake clock moves 1.1 s at every attempt, as time-skipped retries would. */
async function realActivities(reply: (i: number) => StubReply, maxAmbiguousTries = 3) {
  const server = await startStub((_r, i) => reply(i));
  servers.push(server);
  const clock = { t: 1_000_000 };
  const activities = createActivitiesWithSteps({
    config: defaultServiceConfig({ baseUrl: server.url, maxAmbiguousTries, minPollIntervalMs: 2000 }),
    apiKey: () => SECRET_KEY,
    now: () => clock.t,
    logger: capturingLogger(),
    // A folder of its own (not the working directory): the ledger of one run must not answer the next run's keys
    // (seen: the suite on Node 24 read the ledger its run on Node 20 had left in ./out).
    outputRoot: mkdtempSync(path.join(tmpdir(), 'imagebatch-durable-')),
    ledger: lazyTempLedger(),
  });
  const ticking = {
    submitCreation: (input: Parameters<typeof activities.submitCreation>[0]) => {
      clock.t += 1100;
      return activities.submitCreation(input);
    },
    pollCreation: (input: Parameters<typeof activities.pollCreation>[0]) => {
      clock.t += 2100;
      return activities.pollCreation(input);
    },
    createImage: (input: Parameters<typeof activities.createImage>[0]) => {
      clock.t += 2100;
      return activities.createImage(input);
    },
  };
  return { server, activities: ticking };
}

describe('durable retries on the time-skipping server', () => {
  it('heartbeat details survive failed attempts, including an attempt that did not heartbeat', async () => {
    const seen: { attempt: number; details: unknown }[] = [];
    const probe = {
      async countAttempts(input: { heartbeatOnAttempts: number[]; succeedOnAttempt: number }) {
        const info = activityInfo();
        seen.push({ attempt: info.attempt, details: info.heartbeatDetails as unknown });
        if (info.attempt >= input.succeedOnAttempt) return { attempt: info.attempt };
        if (input.heartbeatOnAttempts.includes(info.attempt)) heartbeat({ fromAttempt: info.attempt });
        throw ApplicationFailure.create({ type: 'Probe', message: 'again', nextRetryDelay: '30 seconds' });
      },
    };
    const result = await runWith(probe, (taskQueue) =>
      env().client.workflow.execute(probeHeartbeatWorkflow, {
        taskQueue,
        workflowId: randomUUID(),
        args: [{ heartbeatOnAttempts: [1, 3, 4], succeedOnAttempt: 6 }],
      }),
    );
    expect(result).toEqual({ ok: true, value: { attempt: 6 } });
    expect(seen).toEqual([
      { attempt: 1, details: undefined },
      { attempt: 2, details: { fromAttempt: 1 } },
      { attempt: 3, details: { fromAttempt: 1 } },
      { attempt: 4, details: { fromAttempt: 3 } },
      { attempt: 5, details: { fromAttempt: 4 } },
      { attempt: 6, details: { fromAttempt: 4 } },
    ]);
  });

  it('submitCreation: unknown outcomes are counted across attempts (a 429 in between does not count) and end as Unknown', async () => {
    const replies: StubReply[] = [
      { status: 500, body: { error: { code: ErrorCode.Internal, message: 'oops' } } },
      { status: 429, headers: { 'retry-after': '1' }, body: { error: { code: ErrorCode.RateLimit, message: 'slow' } } },
      { reset: true },
      { status: 500, body: { error: { code: ErrorCode.Internal, message: 'still' } } },
    ];
    const { server, activities } = await realActivities((i) => replies[i] ?? { status: 202, body: { id: 'never' } });
    const t0 = await env().currentTimeMs();
    const result = await runWith(activities, (taskQueue) =>
      env().client.workflow.execute(submitWorkflow, {
        taskQueue,
        workflowId: randomUUID(),
        args: [{ idempotencyKey: 'b1-r1-1', request: { prompt: 'p', model: 'flux-dev' } }],
      }),
    );
    const elapsed = (await env().currentTimeMs()) - t0;
    expect(result).toMatchObject({
      ok: false,
      type: FailureType.Unknown,
      nonRetryable: true,
      details: [{ idempotencyKey: 'b1-r1-1', tries: 3, lastError: 'HTTP 500 ERR_INTERNAL: still' }],
    });
    expect(server.requests).toHaveLength(4);
    expect(new Set(server.requests.map((r) => r.headers['idempotency-key']))).toEqual(new Set(['b1-r1-1']));
    // Waits were taken from nextRetryDelay: backoff >= 0.5 s + 1 s, and the 1 s Retry-After.
    expect(elapsed).toBeGreaterThanOrEqual(2500);
  });

  it('submitCreation: an ambiguous outcome, then the replayed acceptance, with the same key', async () => {
    const { server, activities } = await realActivities((i) =>
      i === 0 ? { reset: true } : { status: 202, body: { id: 'cr_7', status: 'queued', cost_usd: 0.04 } },
    );
    const result = await runWith(activities, (taskQueue) =>
      env().client.workflow.execute(submitWorkflow, {
        taskQueue,
        workflowId: randomUUID(),
        args: [{ idempotencyKey: 'b1-r2-1', request: { prompt: 'p', model: 'flux-dev' } }],
      }),
    );
    expect(result).toEqual({ ok: true, value: { creationId: 'cr_7', status: 'queued', costUsd: 0.04 } });
    expect(server.requests.map((r) => r.headers['idempotency-key'])).toEqual(['b1-r2-1', 'b1-r2-1']);
  });

  it('pollCreation: in-flight answers are retried after the poll interval until the creation ends', async () => {
    const { server, activities } = await realActivities((i) =>
      i < 2
        ? { status: 200, body: { id: 'c', status: i === 0 ? 'queued' : 'running' } }
        : { status: 200, body: { id: 'c', status: 'succeeded', images: [{ url: 'http://files/c-0.png' }] } },
    );
    const t0 = await env().currentTimeMs();
    const result = await runWith(activities, (taskQueue) =>
      env().client.workflow.execute(pollWorkflow, { taskQueue, workflowId: randomUUID(), args: [{ creationId: 'c' }] }),
    );
    const elapsed = (await env().currentTimeMs()) - t0;
    expect(result).toEqual({
      ok: true,
      value: {
        outcome: 'succeeded',
        status: 'succeeded',
        images: [{ url: 'http://files/c-0.png', source: 'images[0].url' }],
      },
    });
    expect(server.requests).toHaveLength(3);
    expect(elapsed).toBeGreaterThanOrEqual(4000);
  });

  it('createImage: the creation its submission learned is polled by the next attempts, never submitted again', async () => {
    const { server, activities } = await realActivities((i) => {
      if (i === 0) return { status: 202, body: { id: 'cr_9', status: 'queued', cost_usd: 0.04 } };
      if (i === 1) return { status: 200, body: { id: 'cr_9', status: 'running' } };
      return { status: 200, body: { id: 'cr_9', status: 'failed', error: 'Generation failed.' } };
    });
    const t0 = await env().currentTimeMs();
    const result = await runWith(activities, (taskQueue) =>
      env().client.workflow.execute(createImageWorkflow, {
        taskQueue,
        workflowId: randomUUID(),
        args: [
          {
            idempotencyKey: 'b1-r3-1',
            request: { prompt: 'p', model: 'flux-dev' },
            batchId: 'b1',
            rowId: 'r3',
            outDir: 'out',
            maxPollWaitMs: 60_000,
          },
        ],
      }),
    );
    const elapsed = (await env().currentTimeMs()) - t0;
    // The price said at acceptance travelled with the creation id, in heartbeat details, to the attempt that ended.
    expect(result).toEqual({
      ok: true,
      value: {
        outcome: 'failed',
        creationId: 'cr_9',
        costUsd: 0.04,
        error: 'Generation failed.',
        retryable: true,
        limit: 'open', // no 429 met, and the queue has no rate limit
      },
    });
    expect(server.requests.map((r) => `${r.method} ${r.url.split('/').pop()}`)).toEqual([
      'POST creations',
      'GET cr_9',
      'GET cr_9',
    ]);
    // Each poll waited the poll interval (nextRetryDelay) after the answer before it.
    expect(elapsed).toBeGreaterThanOrEqual(4000);
  });
});
