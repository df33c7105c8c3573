import { ApplicationFailure } from '@temporalio/common';
import { FailureType, type CreateImageInput, type CreateImageResult, type KeyProgress } from '../../src/model';
import type { RecordRowInput } from '../../src/activities/ledger-activities';

/** One scripted answer of a fake activity: a value, or a failure of the given type. */
export type Step<T> =
  | { ok: T }
  | { fail: string; details?: unknown; progress?: KeyProgress; nonRetryable?: boolean; nextRetryDelayMs?: number };

/**
 * Fake image-service activities that answer from a script, recording every call, so that the workflow's
 * branching (keys, attempts, waits) is tested apart from HTTP. The real activities are tested against the
 * simulator elsewhere.
 */
export function scriptedActivities(script: { createImage: Step<CreateImageResult>[] }) {
  const calls = { createImage: [] as CreateImageInput[], recordRow: [] as RecordRowInput[] };
  function next<T>(steps: Step<T>[], what: string): T {
    const step = steps.shift();
    if (!step) throw ApplicationFailure.create({ message: `script for ${what} ran out`, nonRetryable: true });
    if ('ok' in step) return step.ok;
    throw ApplicationFailure.create({
      type: step.fail,
      message: `scripted ${step.fail}`,
      nonRetryable: step.nonRetryable ?? !RETRYABLE.has(step.fail),
      details: step.progress ? [step.details ?? null, step.progress] : step.details === undefined ? [] : [step.details],
      ...(step.nextRetryDelayMs === undefined ? {} : { nextRetryDelay: step.nextRetryDelayMs }),
    });
  }
  return {
    calls,
    activities: {
      async createImage(input: CreateImageInput): Promise<CreateImageResult> {
        calls.createImage.push(input);
        return next(script.createImage, 'createImage');
      },
      async recordRow(input: RecordRowInput): Promise<void> {
        calls.recordRow.push(input);
      },
    },
  };
}

const RETRYABLE = new Set<string>([FailureType.RateLimited, FailureType.Ambiguous, FailureType.Pending]);

export const succeeded = (id: string, costUsd = 0.04): Step<CreateImageResult> => ({
  ok: {
    outcome: 'succeeded',
    creationId: id,
    costUsd,
    images: [{ url: `http://files/${id}.png`, path: `r/${id}.png`, sha256: 'ab', bytes: 10 }],
  },
});

export const failedWith = (id: string, error: string, retryable: boolean, costUsd = 0.04): Step<CreateImageResult> => ({
  ok: { outcome: 'failed', creationId: id, error, retryable, costUsd },
});
