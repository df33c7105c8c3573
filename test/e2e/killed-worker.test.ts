import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { promptWorkflow } from '../../src/workflows';
import { idempotencyKeyFor, type RowRecord } from '../../src/model';
import { maxWaitMessage } from '../../src/workflows/timeouts';
import { ensureDistIsFresh } from '../helpers/dist';
import { WorkerProcess } from '../helpers/worker-process';

/**
 * The heartbeats of an activity whose request is in flight, on the real server code with worker processes:
 * a request held longer than the heartbeat timeout does not fail a live worker's attempt, and the attempt of a
 * worker killed with SIGKILL mid-request is retried by another worker after the heartbeat timeout (20 s), not
 * after the attempt's start-to-close timeout (5 minutes). The retry re-sends the same idempotency key: one charge.
 *
 * The first two tests each wait out a heartbeat timeout, so they run at the same time, each on a task queue of its
 * own: the kill of the second can never reach the worker that holds the first one's request.
 */
const HEARTBEAT_TIMEOUT_MS = 20_000;
const TASK_QUEUE = `killed-${randomUUID()}`;
/** The held request's queue: one worker, never killed. */
const HELD_TASK_QUEUE = `held-${randomUUID()}`;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let proxy: RecordingProxy | undefined;
let connection: Connection | undefined;
let client: Client;
let frozenAt: number | undefined;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-killed-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  sim = await startSimulator({
    // The last test stops this clock, so that a creation never ends.
    clock: { now: () => frozenAt ?? Date.now() },
    generation: { queuedMs: { minMs: 50, maxMs: 100 }, runningMs: { minMs: 200, maxMs: 400 } },
    limits: { minPollIntervalMs: 500, requestsPerSecond: 1000, burst: 1000 },
  });
  // A submission sent again is held a few seconds, so that the retried attempt can be seen while it runs.
  proxy = await startRecordingProxy(sim.baseUrl, { holdRepeatedPostsMs: 3_000 });
  connection = await Connection.connect({ address: server.address });
  client = new Client({ connection });
  const env = {
    TEMPORAL_ADDRESS: server.address,
    TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    IMAGEGEN_BASE_URL: proxy.baseUrl,
    IMAGEGEN_API_KEY: DEMO_API_KEY,
    IMAGEGEN_MIN_POLL_INTERVAL_MS: '500',
    // The HTTP bounds well above the held requests: only heartbeats can keep these attempts alive.
    IMAGEGEN_HEADERS_TIMEOUT_MS: '110000',
    IMAGEGEN_BODY_TIMEOUT_MS: '110000',
    IMAGEGEN_REQUEST_TIMEOUT_MS: '110000',
  };
  // Two workers on one task queue: the test kills whichever runs the submission; the other takes over. A third,
  // alone on its queue, runs the held request of the first test.
  const queues = [TASK_QUEUE, TASK_QUEUE, HELD_TASK_QUEUE];
  workers.push(
    ...(await Promise.all(
      queues.map((queue) =>
        WorkerProcess.start({ env: { ...env, TEMPORAL_TASK_QUEUE: queue }, outputRoot: dir, readyTimeoutMs: 120_000 }),
      ),
    )),
  );
}, 300_000);

afterAll(async () => {
  for (const w of workers) await w.kill();
  await connection?.close();
  await proxy?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function startRow(rowId: string, prompt: string, maxPollWaitMs?: number, taskQueue = TASK_QUEUE) {
  const batchId = `k${randomUUID().slice(0, 8)}`;
  return client.workflow
    .start(promptWorkflow, {
      taskQueue,
      workflowId: `${batchId}/${rowId}`,
      args: [
        {
          batchId,
          rowId,
          request: { prompt, model: 'flux-dev' },
          outDir: 'out',
          ...(maxPollWaitMs === undefined ? {} : { maxPollWaitMs }),
        },
      ],
    })
    .then((handle) => ({ handle, key: idempotencyKeyFor(batchId, rowId, 1) }));
}

type HistoryEvent = NonNullable<temporal.api.history.v1.IHistory['events']>[number];

/**
 * The createImage activities of a row as its history tells them (one per idempotency key; each carries its key
 * from submission to saved images): the first one's options and its last attempt.
 */
async function createImageActivity(workflowId: string) {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const scheduled = events.filter(
    (e: HistoryEvent) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createImage',
  );
  const started = events.find(
    (e: HistoryEvent) =>
      e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === String(scheduled[0]?.eventId),
  );
  return {
    scheduled: scheduled.length,
    heartbeatTimeoutS: Number(scheduled[0]?.activityTaskScheduledEventAttributes?.heartbeatTimeout?.seconds ?? 0),
    attempt: started?.activityTaskStartedEventAttributes?.attempt,
    lastTimeoutType: started?.activityTaskStartedEventAttributes?.lastFailure?.timeoutFailureInfo?.timeoutType,
  };
}

function chargesFor(key: string) {
  return sim!.charges.byIdempotencyKey().find((s) => s.idempotencyKey === key);
}

describe('activities heartbeat while a request is in flight (dev server, worker processes)', () => {
  it.concurrent(
    'a request held longer than the heartbeat timeout completes on its first attempt',
    async ({ expect }) => {
      const prompt = `a lighthouse in slow fog [held-${randomUUID()}]`;
      sim!.scriptFor(prompt, [{ kind: FaultKind.Slow, delayMs: HEARTBEAT_TIMEOUT_MS + 10_000 }]);
      const { handle, key } = await startRow('held', prompt, undefined, HELD_TASK_QUEUE);
      const result: RowRecord = await handle.result();
      expect(result.state).toBe('succeeded');
      // The held submission was answered on its first attempt: a heartbeat timeout would have sent it again.
      expect(proxy!.posts(key)).toHaveLength(1);
      const activity = await createImageActivity(handle.workflowId);
      expect(activity.scheduled).toBe(1);
      expect(activity.heartbeatTimeoutS).toBe(HEARTBEAT_TIMEOUT_MS / 1000);
      expect(activity.lastTimeoutType ?? undefined).toBeUndefined();
      expect(result.keys).toHaveLength(1);
      expect(result.keys[0]).toMatchObject({ idempotencyKey: key, outcome: 'succeeded' });
      expect(chargesFor(key)?.creationIds).toEqual(result.creationIds);
      expect(result.chargedUsd).toBeCloseTo(chargesFor(key)!.chargedUsd);
    },
    120_000,
  );

  it.concurrent(
    'the attempt of a worker killed mid-request is retried after the heartbeat timeout, with the same key',
    async ({ expect }) => {
      const prompt = `a harbour in slow rain [killed-${randomUUID()}]`;
      sim!.scriptFor(prompt, [{ kind: FaultKind.Slow, delayMs: 35_000 }]);
      const { handle, key } = await startRow('killed', prompt);
      const firstPost = await waitFor('the submission to reach the service', async () => proxy!.posts(key)[0], 30_000);
      // The worker that holds the request, by its identity (`<pid>@<host>`).
      const identity = await waitFor(
        'the submission to be running',
        async () => (await handle.describe()).raw.pendingActivities?.[0]?.lastWorkerIdentity ?? undefined,
        30_000,
      );
      const holder = workers.slice(0, 2).find((w) => w.running && identity.startsWith(`${w.pid}@`));
      expect(holder, `a worker with identity ${identity}`).toBeDefined();
      await holder!.kill();
      const killedAt = Date.now();
      // The retried attempt, seen while it runs (the proxy holds its submission): why the first attempt ended.
      const retried = await waitFor(
        'the attempt to be retried',
        async () => {
          const pending = (await handle.describe()).raw.pendingActivities?.[0];
          return pending && (pending.attempt ?? 0) >= 2 ? pending : undefined;
        },
        60_000,
      );
      expect(retried.activityType?.name).toBe('createImage');
      expect(retried.attempt).toBe(2);
      expect(retried.lastFailure?.timeoutFailureInfo?.timeoutType).toBe(
        temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
      );

      const result: RowRecord = await handle.result();
      expect(result.state).toBe('succeeded');
      expect(result.keys).toHaveLength(1);
      expect(result.keys[0]).toMatchObject({ idempotencyKey: key, outcome: 'succeeded' });
      const posts = proxy!.posts(key);
      expect(posts).toHaveLength(2);
      const retriedAfterKillMs = posts[1]! - killedAt;
      const retriedAfterFirstMs = posts[1]! - firstPost;
      console.log(
        `[killed-worker] the killed worker's submission was sent again ${retriedAfterKillMs} ms after the kill ` +
          `(${retriedAfterFirstMs} ms after the first send; heartbeat timeout ${HEARTBEAT_TIMEOUT_MS} ms)`,
      );
      // Retried because the heartbeats stopped: the start-to-close timeout (5 min) cannot have fired this soon.
      expect((await createImageActivity(handle.workflowId)).scheduled).toBe(1);
      expect(retriedAfterFirstMs).toBeLessThan(60_000);
      // The same key twice, charged once, and the row's record says so.
      expect(chargesFor(key)?.creationIds).toHaveLength(1);
      expect(result.creationIds).toEqual(chargesFor(key)?.creationIds);
      expect(result.chargedUsd).toBeCloseTo(chargesFor(key)!.chargedUsd);
      expect(result.netUsd).toBeCloseTo(chargesFor(key)!.netUsd);
      expect(sim!.charges.violations().chargedTwice).toEqual([]);
    },
    180_000,
  );

  it('a creation that never ends leaves its row unknown at the maximum wait, paid, with a clear message', async () => {
    frozenAt = Date.now();
    try {
      const { handle, key } = await startRow('max-wait', `a glacier at dusk ${randomUUID()}`, 3_000);
      const result: RowRecord = await handle.result();
      // Paid at acceptance and maybe still ending at the service: never taken as safe to submit again.
      expect(result.state).toBe('unknown');
      expect(result.resubmittable).toBe(false);
      expect(result.keys).toHaveLength(1);
      expect(result.keys[0]).toMatchObject({ idempotencyKey: key, outcome: 'timed_out' });
      expect(result.keys[0]?.creationId).toBe(result.creationIds[0]);
      expect(result.creationIds).toEqual(chargesFor(key)?.creationIds);
      expect(result.chargedUsd).toBeCloseTo(chargesFor(key)!.chargedUsd);
      expect(result.netUsd).toBeCloseTo(chargesFor(key)!.netUsd);
      expect(result.netUsd).toBeGreaterThan(0);
      // The message, with the service's last answer in it (patch max-wait-says-last-answer).
      const [before, after] = maxWaitMessage(result.creationIds[0]!, 3_000).split('; ');
      expect(result.error?.startsWith(`${before} (last answer: `)).toBe(true);
      expect(result.error?.endsWith(`); ${after}`)).toBe(true);
    } finally {
      frozenAt = undefined;
    }
  }, 60_000);
});

/** Polls `probe` every 100 ms until it returns a value; throws after `timeoutMs`. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

interface RecordingProxy {
  baseUrl: string;
  /** When each POST with this idempotency key reached the proxy (ms since the epoch), in order. */
  posts(key: string): number[];
  close(): Promise<void>;
}

/**
 * A loopback reverse proxy in front of the simulator that records when every submission arrived, and holds each
 * submission of a key already seen `holdRepeatedPostsMs` before forwarding it.
 */
async function startRecordingProxy(target: string, options: { holdRepeatedPostsMs: number }): Promise<RecordingProxy> {
  const upstream = new URL(target);
  const seen: { at: number; key: string }[] = [];
  const server: Server = createServer((req, res) => {
    const key = req.headers['idempotency-key'];
    const repeated = typeof key === 'string' && seen.some((s) => s.key === key);
    if (req.method === 'POST' && typeof key === 'string') seen.push({ at: Date.now(), key });
    const hold = req.method === 'POST' && repeated ? options.holdRepeatedPostsMs : 0;
    res.on('error', () => undefined);
    req.pause();
    setTimeout(() => {
      const forward = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      req.pipe(forward);
    }, hold);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${upstream.pathname}`,
    posts: (key) => seen.filter((s) => s.key === key).map((s) => s.at),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
