import { ApplicationFailure } from '@temporalio/common';
import type {
  CollectCreationInput,
  CollectCreationResult,
  SubmitCreationInput,
  SubmitCreationResult,
} from '../../src/activities/types';
import { FailureType } from '../../src/api/failure-types';

/** One scripted answer of a fake activity: a value, or a failure of the given type. */
export type Step<T> =
  { ok: T } | { fail: string; details?: unknown; nonRetryable?: boolean; nextRetryDelayMs?: number };

/**
 * Fake image-service activities that answer from a script, recording every call, so that the workflow's
 * branching (keys, attempts, waits) is tested apart from HTTP. The real activities are tested against the
 * simulator elsewhere.
 */
export function scriptedActivities(script: {
  submit: Step<SubmitCreationResult>[];
  collect: Step<CollectCreationResult>[];
}) {
  const calls = { submit: [] as SubmitCreationInput[], collect: [] as CollectCreationInput[] };
  function next<T>(steps: Step<T>[], what: string): T {
    const step = steps.shift();
    if (!step) throw ApplicationFailure.create({ message: `script for ${what} ran out`, nonRetryable: true });
    if ('ok' in step) return step.ok;
    throw ApplicationFailure.create({
      type: step.fail,
      message: `scripted ${step.fail}`,
      nonRetryable: step.nonRetryable ?? !RETRYABLE.has(step.fail),
      details: step.details === undefined ? [] : [step.details],
      ...(step.nextRetryDelayMs === undefined ? {} : { nextRetryDelay: step.nextRetryDelayMs }),
    });
  }
  return {
    calls,
    activities: {
      async submitCreation(input: SubmitCreationInput): Promise<SubmitCreationResult> {
        calls.submit.push(input);
        return next(script.submit, 'submitCreation');
      },
      async collectCreation(input: CollectCreationInput): Promise<CollectCreationResult> {
        calls.collect.push(input);
        return next(script.collect, 'collectCreation');
      },
    },
  };
}

const RETRYABLE = new Set<string>([FailureType.RateLimited, FailureType.Ambiguous, FailureType.Pending]);

export const succeeded = (id: string): Step<CollectCreationResult> => ({
  ok: {
    poll: { outcome: 'succeeded', status: 'succeeded', images: [{ url: `http://files/${id}.png` }] },
    images: [{ url: `http://files/${id}.png`, path: `r/${id}.png`, sha256: 'ab', bytes: 10 }],
  },
});

export const failedWith = (error: string, retryable: boolean, costUsd = 0.04): Step<CollectCreationResult> => ({
  ok: { poll: { outcome: 'failed', status: 'failed', error, retryable, costUsd }, images: [] },
});

export const accepted = (id: string, costUsd = 0.04): Step<SubmitCreationResult> => ({
  ok: { creationId: id, status: 'queued', costUsd },
});
