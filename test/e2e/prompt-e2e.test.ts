import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities';
import { FailureMessage } from '../../src/api/contract';
import { defaultServiceConfig } from '../../src/config/service-config';
import {
  DEMO_ACCOUNT_ID,
  DEMO_API_KEY,
  DEMO_KEY_ID,
  FaultKind,
  startSimulator,
  type Simulator,
} from '../../src/simulator';
import { promptWorkflow, rowResumeSignal } from '../../src/workflows';
import { idempotencyKeyFor, type PromptWorkflowInput } from '../../src/model';
import { createTimeSkippingEnv, useTestEnv, workflowBundle } from '../helpers/temporal';
import { SkippedTimeClock } from '../helpers/skipped-clock';
import { lazyTempLedger } from '../helpers/ledger';

/**
 * promptWorkflow end to end: the real activities and HTTP client against the simulator, on the time-skipping
 * server. Every Retry-After, poll interval and backoff is waited out in skipped time, which the simulator
 * sees through the shared clock.
 */
const env = useTestEnv(createTimeSkippingEnv);
let sim: Simulator;
let clock: SkippedTimeClock;
let outDir: string;

beforeAll(async () => {
  clock = new SkippedTimeClock(env());
  sim = await startSimulator({ clock: { now: () => clock.now() }, sweepIntervalMs: 0 });
  outDir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-e2e-'));
});
afterAll(async () => {
  await sim?.close();
  if (outDir) await rm(outDir, { recursive: true, force: true });
});

/** A worker with the real activities, pointed at the simulator, on the skipped-time clock. */
async function createTestWorker(taskQueue: string): Promise<Worker> {
  return Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities({
      config: defaultServiceConfig({ baseUrl: sim.baseUrl }),
      apiKey: () => DEMO_API_KEY,
      now: clock.now,
      outputRoot: outDir,
      ledger: lazyTempLedger(),
    }),
    interceptors: { activity: [clock.interceptor()] },
  });
}

async function runRow(
  prompt: string,
  extra: Partial<PromptWorkflowInput> = {},
  during?: (id: string) => Promise<void>,
) {
  const taskQueue = `e2e-${randomUUID()}`;
  const worker = await createTestWorker(taskQueue);
  const batchId = `e2e${randomUUID().slice(0, 8)}`;
  const rowId = 'row-1';
  const workflowId = `${batchId}/${rowId}`;
  const startedAt = await env().currentTimeMs();
  const result = await worker.runUntil(async () => {
    const handle = await env().client.workflow.start(promptWorkflow, {
      taskQueue,
      workflowId,
      args: [{ batchId, rowId, request: { prompt, model: 'flux-dev' }, outDir, ...extra }],
    });
    if (during) await during(workflowId);
    return handle.result();
  });
  sim.settle();
  const skippedMs = (await env().currentTimeMs()) - startedAt;
  const history = await env().client.workflow.getHandle(workflowId).fetchHistory();
  return { result, batchId, rowId, skippedMs, events: history.events?.length ?? 0 };
}

function keyCharges(key: string) {
  return sim.charges.byIdempotencyKey().find((s) => s.idempotencyKey === key);
}

function expectChargesClean() {
  expect(sim.charges.violations()).toEqual({
    chargedTwice: [],
    overchargedCreations: [],
    unrefundedFailures: [],
    chargesWithoutCreation: [],
  });
}

describe('promptWorkflow against the simulator (time-skipping)', () => {
  it('succeeds, downloads a real PNG with its checksum, one charge, few history events', async () => {
    const { result, events, batchId, rowId } = await runRow('a lighthouse on a cliff at dusk, oil painting');
    expect(result.keys[0]?.idempotencyKey).toBe(idempotencyKeyFor(batchId, rowId, 1));
    expect(result.state).toBe('succeeded');
    expect(result.images).toHaveLength(1);
    expect(result.images[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(result.chargedUsd).toBeCloseTo(0.04);
    expect(result.netUsd).toBeCloseTo(0.04);
    expect(result.resubmittable).toBe(false);
    // One key, its creation and the charge the service reported for it, as the ledger has them.
    expect(result.keys).toHaveLength(1);
    const [key] = result.keys;
    expect(key).toMatchObject({ attempt: 1, outcome: 'succeeded', creationId: result.creationIds[0] });
    expect(key!.chargedUsd).toBeCloseTo(keyCharges(key!.idempotencyKey)!.chargedUsd);
    expect(keyCharges(key!.idempotencyKey)?.creationIds).toEqual(result.creationIds);
    expect(events).toBeLessThanOrEqual(20);
    expectChargesClean();
  });

  it.each([
    [FaultKind.FailGeneration, FailureMessage.Failed],
    [FaultKind.FailNoImage, FailureMessage.NoImage],
    [FaultKind.FailTimedOut, FailureMessage.TimedOut],
  ] as const)('a retryable failure (%s) is refunded and resubmitted with a new key', async (kind, message) => {
    const prompt = `a quiet harbour at dawn [${kind}-${randomUUID()}]`;
    sim.scriptFor(prompt, [{ kind }]);
    const { result, batchId, rowId } = await runRow(prompt);
    expect(result.state).toBe('succeeded');
    expect(result.keys.map((k) => k.error ?? k.outcome)).toEqual([message, 'succeeded']);
    expect(result.keys.map((k) => k.outcome)).toEqual(['failed', 'succeeded']);
    // The failed creation's charge came back; the row paid once.
    expect(result.keys[0]!.refundedUsd).toBeCloseTo(result.keys[0]!.chargedUsd!);
    expect(result.refundedUsd).toBeCloseTo(0.04);
    expect(result.chargedUsd).toBeCloseTo(0.08);
    expect(result.netUsd).toBeCloseTo(0.04);
    // Each key's charge and refund as the ledger has them.
    for (const [i, key] of result.keys.entries()) {
      expect(key.idempotencyKey).toBe(idempotencyKeyFor(batchId, rowId, i + 1));
      const ledger = keyCharges(key.idempotencyKey);
      expect(ledger?.creationIds).toEqual([key.creationId]);
      expect(key.chargedUsd).toBeCloseTo(ledger!.chargedUsd);
      expect(key.refundedUsd ?? 0).toBeCloseTo(ledger!.refundedUsd);
    }
    expectChargesClean();
  });

  it('the safety filter ends the row with its advice, refunded, never resubmitted', async () => {
    const { result } = await runRow('a portrait [unsafe]');
    expect(result.state).toBe('failed');
    expect(result.error).toBe(FailureMessage.SafetyFilter);
    expect(result.resubmittable).toBe(false);
    expect(result.keys).toHaveLength(1);
    expect(result.keys[0]).toMatchObject({ outcome: 'failed', error: FailureMessage.SafetyFilter });
    // Refunded in full: all of what the creation said it cost.
    expect(result.chargedUsd).toBe(0.04);
    expect(result.refundedUsd).toBe(result.chargedUsd);
    expect(result.netUsd).toBe(0);
    expectChargesClean();
  });

  it('a lost response (reset after commit) is retried with the same key and charged once', async () => {
    const prompt = `a mountain lake with reflections [reset-${randomUUID()}]`;
    sim.scriptFor(prompt, [{ kind: FaultKind.ResetAfterCommit }]);
    const { result, batchId, rowId } = await runRow(prompt);
    expect(result.state).toBe('succeeded');
    expect(result.keys).toHaveLength(1);
    const summary = keyCharges(idempotencyKeyFor(batchId, rowId, 1));
    expect(summary?.creationIds).toHaveLength(1);
    expect(result.creationIds).toEqual(summary?.creationIds);
    expect(summary?.chargedUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });

  it('a 500 after the charge is retried with the same key and charged once', async () => {
    const prompt = `a forest path in autumn [500-${randomUUID()}]`;
    sim.scriptFor(prompt, [{ kind: FaultKind.InternalAfterCharge }]);
    const { result, batchId, rowId } = await runRow(prompt);
    expect(result.state).toBe('succeeded');
    expect(keyCharges(idempotencyKeyFor(batchId, rowId, 1))?.chargedUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });

  it('a 503 waits its Retry-After, then a new key succeeds (the stored 503 is never replayed)', async () => {
    sim.setIdempotencyVariant('all-judged');
    try {
      const prompt = `a desert at noon [503-${randomUUID()}]`;
      sim.scriptFor(prompt, [{ kind: FaultKind.ProviderUnavailable }]);
      const { result, skippedMs } = await runRow(prompt);
      expect(result.state).toBe('succeeded');
      expect(result.keys.map((k) => k.outcome)).toEqual(['refunded', 'succeeded']);
      expect(new Set(result.keys.map((k) => k.idempotencyKey)).size).toBe(2);
      expect(result.netUsd).toBeCloseTo(0.04);
      expect(skippedMs).toBeGreaterThanOrEqual(2_000);
      expectChargesClean();
    } finally {
      sim.setIdempotencyVariant('accepted-only');
    }
  });

  it('a 502 is refunded and the next attempt (a new key) succeeds', async () => {
    const prompt = `a city at night in the rain [502-${randomUUID()}]`;
    sim.scriptFor(prompt, [{ kind: FaultKind.GenerationFailed }]);
    const { result } = await runRow(prompt);
    expect(result.state).toBe('succeeded');
    expect(result.keys.map((k) => k.outcome)).toEqual(['refunded', 'succeeded']);
    expect(new Set(result.keys.map((k) => k.idempotencyKey)).size).toBe(2);
    expect(result.netUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });

  it('a 400 (a body the service rejects) ends the row with every field error, not retried', async () => {
    const { result } = await runRow('a bridge at night', {
      request: { prompt: 'a bridge at night', model: 'flux-dev', width: 100 },
    });
    expect(result.state).toBe('failed');
    expect(result.error).toMatch(/width/);
    expect(result.resubmittable).toBe(false);
    expect(result.keys).toHaveLength(1);
    expect(result.keys[0]?.outcome).toBe('rejected');
    expect([result.chargedUsd, result.netUsd]).toEqual([0, 0]);
    expectChargesClean();
  });

  it('a 403 (account disabled) holds the row until it is resumed, then the same key succeeds', async () => {
    sim.setAccountDisabled(DEMO_ACCOUNT_ID, true);
    const { result } = await runRow('a lantern in the fog', {}, async (workflowId) => {
      await env().sleep(30_000);
      sim.setAccountDisabled(DEMO_ACCOUNT_ID, false);
      await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
    });
    expect(result.state).toBe('succeeded');
    expect(result.keys).toHaveLength(1);
    expect(result.netUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });

  it('a 401 (key revoked) holds the row; once the key is valid again and the row resumed, the same key succeeds', async () => {
    sim.revokeKey(DEMO_KEY_ID);
    const { result } = await runRow('a kite above dunes', {}, async (workflowId) => {
      await env().sleep(30_000);
      sim.addKey(DEMO_ACCOUNT_ID, `${DEMO_KEY_ID}-again`, DEMO_API_KEY);
      await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
    });
    expect(result.state).toBe('succeeded');
    expect(result.keys).toHaveLength(1);
    expect(result.netUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });

  it('a model the account lacks ends the row as failed at once', async () => {
    const taskQueue = `e2e-${randomUUID()}`;
    const worker = await createTestWorker(taskQueue);
    const result = await worker.runUntil(
      env().client.workflow.execute(promptWorkflow, {
        taskQueue,
        workflowId: `m${randomUUID()}/row-1`,
        args: [{ batchId: 'm', rowId: 'row-1', request: { prompt: 'a cat', model: 'no-such-model' }, outDir }],
      }),
    );
    expect(result.state).toBe('failed');
    expect(result.error).toMatch(/model/i);
    expect(result.keys).toHaveLength(1);
    expect(result.keys[0]?.outcome).toBe('rejected');
    expect(result.resubmittable).toBe(false);
    expect(result.netUsd).toBe(0);
  });

  it('a 429 storm: every Retry-After honoured in skipped time, one key, one charge', async () => {
    sim.setLimits({ requestsPerSecond: 0.05, burst: 1 });
    try {
      const { result, batchId, rowId, skippedMs } = await runRow('a storm over the sea, dramatic light');
      expect(result.state).toBe('succeeded');
      expect(keyCharges(idempotencyKeyFor(batchId, rowId, 1))?.chargedUsd).toBeCloseTo(0.04);
      // Three requests at least (submit, poll, poll...) at one per 20 s.
      expect(skippedMs).toBeGreaterThanOrEqual(20_000);
      expectChargesClean();
    } finally {
      sim.setLimits({ requestsPerSecond: 10, burst: 10 });
    }
  });

  it('a 402 pauses the row until it is resumed, then a new key succeeds', async () => {
    sim.setWallet(DEMO_ACCOUNT_ID, 0);
    const { result } = await runRow('a garden in spring', {}, async (workflowId) => {
      await env().sleep(30_000);
      sim.setWallet(DEMO_ACCOUNT_ID, 100);
      await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
    });
    expect(result.state).toBe('succeeded');
    // The 402 was judged and not charged: the next try is a new key, which paid once.
    expect(result.keys.map((k) => k.outcome)).toEqual(['declined', 'succeeded']);
    expect(result.keys[0]?.chargedUsd).toBeUndefined();
    expect(keyCharges(result.keys[0]!.idempotencyKey)).toBeUndefined();
    expect(result.netUsd).toBeCloseTo(0.04);
    expectChargesClean();
  });
});
