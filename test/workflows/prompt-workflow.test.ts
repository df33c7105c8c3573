import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { FailureMessage } from '../../src/api/contract';
import { FailureType, idempotencyKeyFor, type PromptWorkflowInput } from '../../src/model';
import { promptWorkflow, rowResumeSignal } from '../../src/workflows';
import { maxWaitMessage } from '../../src/workflows/timeouts';
import { ROW_HAPPY_PATH_EVENTS } from '../helpers/history-events';
import { createTimeSkippingEnv, useTestEnv, workflowBundle } from '../helpers/temporal';
import { failedWith, scriptedActivities, succeeded, type Step } from './fake-activities';

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

const key = (rowId: string, n: number) => idempotencyKeyFor('b1', rowId, n);

describe('promptWorkflow (scripted activities, time-skipping server)', () => {
  it('happy path: one key, one creation, images, its record on disk: ROW_HAPPY_PATH_EVENTS.alone history events', async () => {
    const { result, calls, events } = await run({ createImage: [succeeded('c1')] }, input('r1'));
    expect(result.state).toBe('succeeded');
    expect(result.creationIds).toEqual(['c1']);
    expect(result.keys).toEqual([
      {
        attempt: 1,
        idempotencyKey: key('r1', 1),
        outcome: 'succeeded',
        priceSource: 'creation',
        creationId: 'c1',
        chargedUsd: 0.04,
      },
    ]);
    expect(result.images).toHaveLength(1);
    expect(result.chargedUsd).toBeCloseTo(0.04);
    expect(result.refundedUsd).toBe(0);
    expect(result.netUsd).toBeCloseTo(0.04);
    expect(result.resubmittable).toBe(false);
    expect(calls.createImage.map((c) => c.idempotencyKey)).toEqual([key('r1', 1)]);
    // Its record went to its batch's ledger on disk, once, as it ended.
    expect(calls.recordRow).toEqual([{ outDir: '/tmp/out', record: result }]);
    console.log(`history events of a row alone, happy path: ${events}`);
    expect(events).toBe(ROW_HAPPY_PATH_EVENTS.alone);
  });

  it('a retryable failure string starts a new attempt with a new key, and succeeds', async () => {
    const { result, calls } = await run(
      { createImage: [failedWith('c1', FailureMessage.Failed, true), succeeded('c2')] },
      input('r2'),
    );
    expect(result.state).toBe('succeeded');
    expect(result.creationIds).toEqual(['c1', 'c2']);
    expect(calls.createImage.map((c) => c.idempotencyKey)).toEqual([key('r2', 1), key('r2', 2)]);
    expect(result.keys.map((k) => k.outcome)).toEqual(['failed', 'succeeded']);
    expect(result.keys[0]).toMatchObject({ chargedUsd: 0.04, refundedUsd: 0.04, error: FailureMessage.Failed });
    expect(result.refundedUsd).toBeCloseTo(0.04);
    expect(result.chargedUsd).toBeCloseTo(0.08);
    expect(result.netUsd).toBeCloseTo(0.04);
    expect(result.error).toBeUndefined();
  });

  it('the safety filter ends the row at once, with the service words, not resubmittable', async () => {
    const { result, calls } = await run(
      { createImage: [failedWith('c1', FailureMessage.SafetyFilter, false)] },
      input('r3'),
    );
    expect(result.state).toBe('failed');
    expect(result.error).toBe(FailureMessage.SafetyFilter);
    expect(result.resubmittable).toBe(false);
    expect(result.netUsd).toBe(0);
    expect(calls.createImage).toHaveLength(1);
  });

  it('retryable failures stop after maxAttempts; the row may be submitted again (all refunded)', async () => {
    const { result, calls } = await run(
      {
        createImage: [failedWith('c1', FailureMessage.TimedOut, true), failedWith('c2', FailureMessage.NoImage, true)],
      },
      input('r4', { maxAttempts: 2 }),
    );
    expect(result.state).toBe('failed');
    expect(calls.createImage).toHaveLength(2);
    expect(result.error).toContain(FailureMessage.NoImage);
    expect(result.error).toContain('gave up after 2 attempts');
    expect(result.resubmittable).toBe(true);
    expect(result.netUsd).toBe(0);
  });

  it('a 503 waits its Retry-After on a durable timer, then submits with a new key', async () => {
    const before = await env().currentTimeMs();
    const refunded: Step<never> = {
      fail: FailureType.Refunded,
      details: { httpStatus: 503, code: 'ERR_PROVIDER_UNAVAILABLE', message: 'unavailable', retryAfterMs: 120_000 },
      progress: {},
    };
    const { result, calls } = await run({ createImage: [refunded, succeeded('c2')] }, input('r5'));
    const after = await env().currentTimeMs();
    expect(result.state).toBe('succeeded');
    expect(calls.createImage.map((c) => c.idempotencyKey)).toEqual([key('r5', 1), key('r5', 2)]);
    expect(result.keys.map((k) => k.outcome)).toEqual(['refunded', 'succeeded']);
    expect(after - before).toBeGreaterThanOrEqual(120_000);
  });

  it('a rejection (400) ends the row with the field errors, no retry, not resubmittable as it is', async () => {
    const { result, calls } = await run(
      {
        createImage: [
          {
            fail: FailureType.Rejected,
            details: {
              httpStatus: 400,
              code: 'ERR_INVALID_REQUEST',
              message: 'Invalid request',
              fieldErrors: [{ field: 'width', message: 'must be a multiple of 64' }],
            },
            progress: {},
          },
        ],
      },
      input('r6'),
    );
    expect(result.state).toBe('failed');
    expect(result.error).toBe('Invalid request (width: must be a multiple of 64)');
    expect(result.keys).toMatchObject([{ outcome: 'rejected' }]);
    expect(result.resubmittable).toBe(false);
    expect(calls.createImage).toHaveLength(1);
  });

  it('an unknown outcome ends as unknown with its key, not resubmitted', async () => {
    const { result, calls } = await run(
      {
        createImage: [
          {
            fail: FailureType.Unknown,
            details: { idempotencyKey: 'k', tries: 5, lastError: 'HTTP 500' },
            progress: {},
          },
        ],
      },
      input('r7'),
    );
    expect(result.state).toBe('unknown');
    expect(result.keys).toMatchObject([{ idempotencyKey: key('r7', 1), outcome: 'unknown' }]);
    expect(result.resubmittable).toBe(false);
    expect(calls.createImage).toHaveLength(1);
  });

  it('a creation still running at the maximum wait: unknown, its creation and charge kept, with a clear message', async () => {
    const { result } = await run(
      {
        createImage: [
          {
            fail: FailureType.MaxWait,
            details: { maxPollWaitMs: 300_000 },
            progress: { creationId: 'cr_forever', costUsd: 0.04, acceptedAtMs: 1 },
          },
        ],
      },
      input('r7b', { maxPollWaitMs: 300_000 }),
    );
    expect(result.state).toBe('unknown');
    expect(result.keys).toMatchObject([{ outcome: 'timed_out', creationId: 'cr_forever', chargedUsd: 0.04 }]);
    expect(result.error).toBe(maxWaitMessage('cr_forever', 300_000));
    expect(result.chargedUsd).toBeCloseTo(0.04);
    expect(result.resubmittable).toBe(false);
  });

  it("a creation out of time says the service's last answer (a status under another name, for one)", async () => {
    const lastAnswer = 'HTTP 200 without a creation status at the fields of IMAGEGEN_STATUS_FIELDS (…: id, state)';
    const { result } = await run(
      {
        createImage: [
          {
            fail: FailureType.MaxWait,
            details: { maxPollWaitMs: 300_000, lastAnswer },
            progress: { creationId: 'cr_state', costUsd: 0.04, acceptedAtMs: 1 },
          },
        ],
      },
      input('r7c', { maxPollWaitMs: 300_000 }),
    );
    expect(result.state).toBe('unknown');
    expect(result.error).toBe(maxWaitMessage('cr_state', 300_000, lastAnswer));
    expect(result.error).toContain(`(last answer: ${lastAnswer});`);
  });

  it('a paid success whose images could not be saved: images_unsaved, with its creation, charge and error', async () => {
    const { result } = await run(
      {
        createImage: [
          {
            fail: FailureType.DownloadFailed,
            details: {
              url: 'http://files/x',
              index: 0,
              reason: 'content type application/octet-stream is not an image',
            },
            progress: { creationId: 'c1', costUsd: 0.04, generated: true },
          },
        ],
      },
      input('r7c'),
    );
    expect(result.state).toBe('images_unsaved');
    expect(result.creationIds).toEqual(['c1']);
    expect(result.keys).toMatchObject([{ outcome: 'succeeded', creationId: 'c1', chargedUsd: 0.04 }]);
    expect(result.chargedUsd).toBeCloseTo(0.04);
    expect(result.error).toContain('scripted ImageApi.DownloadFailed');
    expect(result.resubmittable).toBe(false);
  });

  it('a batch stop (402) waits for a resume signal, then tries a new key', async () => {
    const stop: Step<never> = {
      fail: FailureType.BatchStop,
      details: { reason: 'insufficient_balance', httpStatus: 402, message: 'top up', requiredUsd: 0.04 },
      progress: {},
    };
    const { result, calls } = await run({ createImage: [stop, succeeded('c2')] }, input('r8'), async (workflowId) => {
      await env().sleep(60_000);
      await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
    });
    expect(result.state).toBe('succeeded');
    expect(calls.createImage.map((c) => c.idempotencyKey)).toEqual([key('r8', 1), key('r8', 2)]);
    expect(result.keys.map((k) => k.outcome)).toEqual(['declined', 'succeeded']);
  });

  it('a batch stop (401) after the acceptance keeps the key, and polls its creation after the resume', async () => {
    const stop: Step<never> = {
      fail: FailureType.BatchStop,
      details: { reason: 'api_key_invalid', httpStatus: 401, message: 'api_key_invalid' },
      progress: { creationId: 'c1', costUsd: 0.04, acceptedAtMs: 5 },
    };
    const { result, calls } = await run({ createImage: [stop, succeeded('c1')] }, input('r9'), async (workflowId) => {
      await env().sleep(60_000); // the row meets the stop and waits; a resume sent before that is not needed
      await env().client.workflow.getHandle(workflowId).signal(rowResumeSignal);
    });
    expect(calls.createImage.map((c) => c.idempotencyKey)).toEqual([key('r9', 1), key('r9', 1)]);
    expect(calls.createImage[1]?.progress).toMatchObject({ creationId: 'c1', acceptedAtMs: 5 });
    expect(result.creationIds).toEqual(['c1']);
    expect(result.state).toBe('succeeded');
  });

  it('rate limits are retried by the activity with the same key, adding no history events', async () => {
    const limited: Step<never> = { fail: FailureType.RateLimited, nextRetryDelayMs: 30_000 };
    const { result, calls, events } = await run(
      { createImage: [limited, limited, limited, succeeded('c1')] },
      input('r10'),
    );
    expect(result.state).toBe('succeeded');
    expect(new Set(calls.createImage.map((c) => c.idempotencyKey))).toEqual(new Set([key('r10', 1)]));
    expect(calls.createImage).toHaveLength(4);
    expect(events).toBe(ROW_HAPPY_PATH_EVENTS.alone);
  });

  it('cancelled while its key is in flight: completes with its record, the key unknown (it may have been charged)', async () => {
    const hang: Step<never> = { fail: FailureType.RateLimited, nextRetryDelayMs: 3_600_000 };
    const { result } = await run({ createImage: [hang] }, input('r11'), async (workflowId) => {
      await env().sleep(60_000);
      await env().client.workflow.getHandle(workflowId).cancel();
    });
    expect(result.state).toBe('cancelled');
    expect(result.keys).toMatchObject([{ idempotencyKey: key('r11', 1), outcome: 'unknown' }]);
    expect(result.resubmittable).toBe(false);
  });

  it('blocked by a batch stop, a row whose batch is gone ends cancelled with its record instead of waiting forever', async () => {
    const stop: Step<never> = {
      fail: FailureType.BatchStop,
      details: { reason: 'api_key_invalid', httpStatus: 401, message: 'api_key_invalid' },
      progress: {},
    };
    const { result, calls } = await run(
      { createImage: [stop] },
      input('r12', { parentWorkflowId: `no-such-batch-${randomUUID()}`, batchCheckEveryMs: 60_000 }),
    );
    expect(result.state).toBe('cancelled');
    expect(result.error).toContain('ended while the row waited for a resume');
    // The key never got an answer that settles it (a 401 stops before the look-up, an earlier try may have gone
    // unanswered): it is kept as unknown, for reconciliation with the same key.
    expect(result.keys).toMatchObject([{ idempotencyKey: key('r12', 1), outcome: 'unknown' }]);
    expect(calls.createImage).toHaveLength(1);
  });

  it('the maximum-wait message names the bound in the unit it was given', () => {
    expect(maxWaitMessage('c', 30 * 60_000)).toContain('maximum wait of 30 min');
    expect(maxWaitMessage('c', 2 * 3_600_000)).toContain('maximum wait of 2 h');
    expect(maxWaitMessage('c', 90_000)).toContain('maximum wait of 90 s');
  });
});
