import { describe, expect, it } from 'vitest';
import type { FailureOutcome } from '../../src/api/classify';
import { toApplicationFailure } from '../../src/activities/failures';
import { endsKey, FailureType, handledFailure, KEY_ENDING_FAILURES } from '../../src/model';
import { CREATE_IMAGE_OPTIONS } from '../../src/workflows/timeouts';

describe('the one list of failure types that end a key', () => {
  it('is the retry policy of createImage, in the order running workflows recorded it', () => {
    expect(CREATE_IMAGE_OPTIONS.retry?.nonRetryableErrorTypes).toEqual([
      'ImageApi.Unknown',
      'ImageApi.Refunded',
      'ImageApi.Rejected',
      'ImageApi.BatchStop',
      'ImageApi.CreationNotFound',
      'ImageApi.MaxWait',
      'ImageApi.Config',
      'ImageApi.NotSent',
    ]);
    expect(CREATE_IMAGE_OPTIONS.retry?.nonRetryableErrorTypes).toEqual([...KEY_ENDING_FAILURES]);
  });

  it('decides which failures of an outcome the activity marks non-retryable', () => {
    const outcomes: FailureOutcome[] = [
      { kind: 'rateLimited', httpStatus: 429, code: 'ERR_RATE_LIMITED', message: 'slow down', retryAfterMs: 1000 },
      { kind: 'ambiguous', lastError: 'ECONNRESET' },
      { kind: 'malformed', lastError: 'not JSON' },
      { kind: 'inFlight', status: 'running' },
      { kind: 'refunded', details: { httpStatus: 502, code: 'ERR_GENERATION_FAILED', message: 'failed' } },
      { kind: 'rejected', details: { httpStatus: 400, code: 'ERR_VALIDATION', message: 'bad', fieldErrors: [] } },
      { kind: 'batchStop', details: { reason: 'insufficient_balance', httpStatus: 402, message: 'top up' } },
      { kind: 'notFound', httpStatus: 404, code: 'ERR_NOT_FOUND', message: 'no such creation' },
      { kind: 'unknown', details: { idempotencyKey: 'ib/b/r/a1', tries: 5, lastError: 'HTTP 500' } },
      { kind: 'notSent', lastError: 'ECONNREFUSED' },
      { kind: 'keyNotSent', details: { idempotencyKey: 'ib/b/r/a1', tries: 6, lastError: 'ECONNREFUSED' } },
      { kind: 'config', message: 'bad key' },
    ];
    for (const outcome of outcomes) {
      const failure = toApplicationFailure(outcome, 100);
      expect(failure.nonRetryable, `${outcome.kind} -> ${failure.type}`).toBe(endsKey(failure.type));
    }
    expect(outcomes.map((o) => endsKey(toApplicationFailure(o).type))).toEqual([
      false,
      false,
      false,
      false,
      true,
      true,
      true,
      true,
      true,
      false,
      true,
      true,
    ]);
  });

  it('leaves a workflow the key-ending types and a failed download to branch on, nothing else', () => {
    for (const type of Object.values(FailureType)) {
      const handled = KEY_ENDING_FAILURES.some((t) => t === type) || type === FailureType.DownloadFailed;
      expect(handledFailure(type), type).toBe(handled ? type : undefined);
    }
    expect(handledFailure(undefined)).toBeUndefined();
    expect(handledFailure('Error')).toBeUndefined();
  });
});
