import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import type { CollectCreationInput } from '../../src/activities/types';
import { FailureType } from '../../src/api/failure-types';
import { promptWorkflow } from '../../src/workflows';
import { maxWaitMessage } from '../../src/workflows/timeouts';
import { createTimeSkippingEnv, useTestEnv, workflowBundle } from '../helpers/temporal';

const env = useTestEnv(createTimeSkippingEnv);

/**
 * The maximum wait for a creation: a creation that never ends makes its row fail once `maxPollWaitMs` has passed
 * (the collect activity's schedule-to-close timeout), with a message that says what happened and what to do,
 * instead of polling forever.
 */
describe('maximum wait for a creation (time-skipping server)', () => {
  it('a creation that never ends fails its row after maxPollWaitMs, with a clear message', async () => {
    const taskQueue = `maxwait-${randomUUID()}`;
    const polls: number[] = [];
    const worker = await Worker.create({
      connection: env().nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: {
        async submitCreation() {
          return { creationId: 'cr_forever', status: 'queued', costUsd: 0.04 };
        },
        // Always still running: every poll asks to be tried again after the poll interval.
        async collectCreation(_input: CollectCreationInput): Promise<never> {
          polls.push(await env().currentTimeMs());
          throw ApplicationFailure.create({ type: FailureType.Pending, message: 'running', nextRetryDelay: 20_000 });
        },
      },
    });
    const startedMs = await env().currentTimeMs();
    const maxPollWaitMs = 5 * 60_000;
    const result = await worker.runUntil(
      env().client.workflow.execute(promptWorkflow, {
        taskQueue,
        workflowId: `mw/${randomUUID()}`,
        args: [
          {
            batchId: 'mw',
            rowId: 'r1',
            request: { prompt: 'a slow sunrise', model: 'flux-dev' },
            outDir: '/tmp/out',
            maxPollWaitMs,
          },
        ],
      }),
    );
    // The server's clock runs on once the workflow has ended: the last poll tells when the row gave up.
    const lastPollMs = polls.at(-1)! - startedMs;
    expect(result.state).toBe('failed');
    expect(result.errorRetryable).toBe(true);
    expect(result.attempts).toMatchObject([{ attempt: 1, creationId: 'cr_forever', outcome: 'timed_out' }]);
    expect(result.error).toBe(maxWaitMessage('cr_forever', maxPollWaitMs));
    expect(result.error).toContain('did not end within the maximum wait of 5 min');
    expect(result.error).toContain('--max-poll-wait');
    expect(result.chargedUsd).toBeCloseTo(0.04);
    // It polled all along (every 20 s), and gave up at the bound: when the next poll would have passed it.
    expect(polls.length).toBeGreaterThanOrEqual(10);
    expect(lastPollMs).toBeGreaterThan(maxPollWaitMs - 2 * 20_000);
    expect(lastPollMs).toBeLessThanOrEqual(maxPollWaitMs);
  });

  it('the message names the bound in the unit it was given', () => {
    expect(maxWaitMessage('c', 30 * 60_000)).toContain('maximum wait of 30 min');
    expect(maxWaitMessage('c', 2 * 3_600_000)).toContain('maximum wait of 2 h');
    expect(maxWaitMessage('c', 90_000)).toContain('maximum wait of 90 s');
  });
});
