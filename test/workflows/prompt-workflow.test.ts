import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { FailureMessage } from '../../src/api/contract';
import { FailureType } from '../../src/api/failure-types';
import { idempotencyKeyFor } from '../../src/workflows/keys';
import { promptWorkflow, rowResumeSignal } from '../../src/workflows';
import type { PromptWorkflowInput } from '../../src/workflows/model';
import { createTimeSkippingEnv, useTestEnv, workflowBundle } from '../helpers/temporal';
import { accepted, failedWith, scriptedActivities, succeeded, type Step } from './fake-activities';

const env = useTestEnv(createTimeSkippingEnv);

function input(rowId: string, extra: Partial<PromptWorkflowInput> = {}): PromptWorkflowInput {
  return {
    batchId: 'b1',
    rowId,
    request: { prompt: 'a red fox in fresh snow', model: 'flux-dev' },
    outDir: '/tmp/out',
    ...extra,
  };
}

async function run(
  script: Parameters<typeof scriptedActivities>[0],
  wfInput: PromptWorkflowInput,
  during?: (workflowId: string) => Promise<void>,
) {
  const taskQueue = `wf-${randomUUID()}`;
  const fake = scriptedActivities(script);
  const worker = await Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: fake.activities,
  });
  const workflowId = `test/${randomUUID()}`;
  const result = await worker.runUntil(async () => {
    const handle = await env().client.workflow.start(promptWorkflow, { taskQueue, workflowId, args: [wfInput] });
    if (during) await during(workflowId);
    return handle.result();
  });
  const history = await env().client.workflow.getHandle(workflowId).fetchHistory();
  return { result, calls: fake.calls, events: history.events?.length ?? 0 };
}

describe('promptWorkflow (scripted activities, time-skipping server)', () => {
  it('happy path: one key, one creation, images, 17 history events', async () => {
    const { result, calls, events } = await run({ submit: [accepted('c1')], collect: [succeeded('c1')] }, input('r1'));
    expect(result.state).toBe('succeeded');
    expect(result.creationIds).toEqual(['c1']);
    expect(result.images).toHaveLength(1);
    expect(result.chargedUsd).toBeCloseTo(0.04);
    expect(result.refundedUsd).toBe(0);
    expect(calls.submit.map((c) => c.idempotencyKey)).toEqual([idempotencyKeyFor('b1', 'r1', 1)]);
    expect(events).toBeLessThanOrEqual(20);
    expect(events).toBe(17);
  });

  it('a retryable failure string starts a new attempt with a new key, and succeeds', async () => {
    const { result, calls } = await run(
      { submit: [accepted('c1'), accepted('c2')], collect: [failedWith(FailureMessage.Failed, true), succeeded('c2')] },
      input('r2'),
    );
    expect(result.state).toBe('succeeded');
    expect(result.creationIds).toEqual(['c1', 'c2']);
    const keys = calls.submit.map((c) => c.idempotencyKey);
    expect(new Set(keys).size).toBe(2);
    expect(result.refundedUsd).toBeCloseTo(0.04);
    expect(result.chargedUsd).toBeCloseTo(0.08);
    expect(result.error).toBeUndefined();
  });

  it('the safety filter ends the row at once, with the service words, not retryable', async () => {
    const { result, calls } = await run(
      { submit: [accepted('c1')], collect: [failedWith(FailureMessage.SafetyFilter, false)] },
      input('r3'),
    );
    expect(result.state).toBe('failed');
    expect(result.error).toBe(FailureMessage.SafetyFilter);
    expect(result.errorRetryable).toBe(false);
    expect(calls.submit).toHaveLength(1);
  });

  it('retryable failures stop after maxAttempts', async () => {
    const f = failedWith(FailureMessage.TimedOut, true);
    const { result, calls } = await run(
      { submit: [accepted('c1'), accepted('c2')], collect: [f, failedWith(FailureMessage.NoImage, true)] },
      input('r4', { maxAttempts: 2 }),
    );
    expect(result.state).toBe('failed');
    expect(calls.submit).toHaveLength(2);
    expect(result.error).toContain(FailureMessage.NoImage);
    expect(result.error).toContain('gave up after 2 attempts');
  });

  it('a 503 waits its Retry-After on a durable timer, then submits with a new key', async () => {
    const before = await env().currentTimeMs();
    const refunded: Step<never> = {
      fail: FailureType.Refunded,
      details: { httpStatus: 503, code: 'ERR_PROVIDER_UNAVAILABLE', message: 'unavailable', retryAfterMs: 120_000 },
    };
    const { result, calls } = await run(
      { submit: [refunded, accepted('c2')], collect: [succeeded('c2')] },
      input('r5'),
    );
    const after = await env().currentTimeMs();
    expect(result.state).toBe('succeeded');
    expect(calls.submit.map((c) => c.idempotencyKey)).toEqual([
      idempotencyKeyFor('b1', 'r5', 1),
      idempotencyKeyFor('b1', 'r5', 2),
    ]);
    expect(after - before).toBeGreaterThanOrEqual(120_000);
  });

  it('a rejection (400) ends the row with the field errors, no retry', async () => {
    const { result, calls } = await run(
      {
        submit: [
          {
            fail: FailureType.Rejected,
            details: {
              httpStatus: 400,
              code: 'ERR_INVALID_REQUEST',
              message: 'Invalid request',
              fieldErrors: [{ field: 'width', message: 'must be a multiple of 64' }],
            },
          },
        ],
        collect: [],
      },
      input('r6'),
    );
    expect(result.state).toBe('failed');
    expect(result.error).toBe('Invalid request (width: must be a multiple of 64)');
    expect(calls.submit).toHaveLength(1);
  });

  it('an unknown outcome ends as unknown with its key, not resubmitted', async () => {
    const { result, calls } = await run(
      {
        submit: [{ fail: FailureType.Unknown, details: { idempotencyKey: 'k', tries: 5, lastError: 'HTTP 500' } }],
        collect: [],
      },
      input('r7'),
    );
    expect(result.state).toBe('unknown');
    expect(result.unknownKey).toBe(idempotencyKeyFor('b1', 'r7', 1));
    expect(calls.submit).toHaveLength(1);
  });

  it('a batch stop (402) waits for a resume signal, then tries a new key', async () => {
    const stop: Step<never> = {
      fail: FailureType.BatchStop,
      details: { reason: 'insufficient_balance', httpStatus: 402, message: 'top up', requiredUsd: 0.04 },
    };
    const { result, calls } = await run(
      { submit: [stop, accepted('c2')], collect: [succeeded('c2')] },
      input('r8'),
      async (workflowId) => {
        await env().sleep(60_000);
        await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
      },
    );
    expect(result.state).toBe('succeeded');
    expect(calls.submit.map((c) => c.idempotencyKey)).toEqual([
      idempotencyKeyFor('b1', 'r8', 1),
      idempotencyKeyFor('b1', 'r8', 2),
    ]);
  });

  it('a batch stop (401) keeps the same key after the resume', async () => {
    const stop: Step<never> = {
      fail: FailureType.BatchStop,
      details: { reason: 'api_key_invalid', httpStatus: 401, message: 'api_key_invalid' },
    };
    const { calls } = await run(
      { submit: [stop, accepted('c2')], collect: [succeeded('c2')] },
      input('r9'),
      async (workflowId) => {
        await env().sleep(60_000); // the row meets the stop and waits; a resume sent before that is not needed
        await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
      },
    );
    expect(calls.submit.map((c) => c.idempotencyKey)).toEqual([
      idempotencyKeyFor('b1', 'r9', 1),
      idempotencyKeyFor('b1', 'r9', 1),
    ]);
  });

  it('rate limits are retried by the activity with the same key, adding no history events', async () => {
    const limited: Step<never> = { fail: FailureType.RateLimited, nextRetryDelayMs: 30_000 };
    const { result, calls, events } = await run(
      { submit: [limited, limited, limited, accepted('c1')], collect: [succeeded('c1')] },
      input('r10'),
    );
    expect(result.state).toBe('succeeded');
    expect(new Set(calls.submit.map((c) => c.idempotencyKey))).toEqual(new Set([idempotencyKeyFor('b1', 'r10', 1)]));
    expect(calls.submit).toHaveLength(4);
    expect(events).toBe(17);
  });
});
