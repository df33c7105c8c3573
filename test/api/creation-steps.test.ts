import { describe, expect, it } from 'vitest';
import type { ClientOutcome } from '../../src/api/client';
import { backoffCeilingMs, pollStep, submitStep } from '../../src/api/creation-steps';

/** What each answer to a submission or a poll means, as createImage and doctor's paid test both read it. */

const answers: Record<ClientOutcome['kind'], ClientOutcome> = {
  accepted: { kind: 'accepted', creationId: 'c1', status: 'queued', costUsd: 0.04 },
  ended: { kind: 'ended', result: { outcome: 'failed', status: 'failed', error: 'x', retryable: false } },
  inFlight: { kind: 'inFlight', status: 'running' },
  models: { kind: 'models', models: [] },
  rateLimited: { kind: 'rateLimited', httpStatus: 429, code: 'ERR_RATE_LIMIT', message: 'm', retryAfterMs: 10 },
  notSent: { kind: 'notSent', lastError: 'ECONNREFUSED' },
  ambiguous: { kind: 'ambiguous', httpStatus: 500, lastError: 'HTTP 500' },
  refunded: { kind: 'refunded', details: { httpStatus: 502, code: 'ERR_GENERATION_FAILED', message: 'm' } },
  rejected: { kind: 'rejected', details: { httpStatus: 400, code: 'ERR_VALIDATION', message: 'm', fieldErrors: [] } },
  batchStop: { kind: 'batchStop', details: { reason: 'api_key_invalid', httpStatus: 401, message: 'm' } },
  notFound: { kind: 'notFound', httpStatus: 404, code: 'ERR_NOT_FOUND', message: 'm' },
  malformed: { kind: 'malformed', httpStatus: 200, lastError: 'no id' },
  config: { kind: 'config', message: 'm' },
};
const kinds = Object.keys(answers) as ClientOutcome['kind'][];
const stepOf = (step: (o: ClientOutcome) => { kind: string }) =>
  Object.fromEntries(kinds.map((kind) => [kind, step(answers[kind]).kind]));

describe('the answer table', () => {
  it('reads every answer to a submission', () => {
    expect(stepOf(submitStep)).toEqual({
      accepted: 'accepted',
      ended: 'unexpected',
      inFlight: 'unexpected',
      models: 'unexpected',
      rateLimited: 'held',
      notSent: 'unclear',
      ambiguous: 'unclear',
      refunded: 'ends',
      rejected: 'ends',
      batchStop: 'ends',
      notFound: 'unexpected',
      malformed: 'unclear',
      config: 'ends',
    });
    expect(submitStep(answers.accepted)).toEqual({
      kind: 'accepted',
      accepted: { creationId: 'c1', status: 'queued', costUsd: 0.04 },
    });
    // Only a send that never left is known not to have been charged; an unreadable answer is retried as a 500's.
    expect(submitStep(answers.notSent)).toMatchObject({ sent: false, failure: answers.notSent });
    expect(submitStep(answers.malformed)).toEqual({
      kind: 'unclear',
      lastError: 'no id',
      sent: true,
      failure: { kind: 'ambiguous', lastError: 'no id' },
    });
    expect(submitStep(answers.notFound)).toEqual({
      kind: 'unexpected',
      lastError: 'unexpected notFound answer to a submission',
    });
  });

  it('reads every answer to a poll', () => {
    expect(stepOf(pollStep)).toEqual({
      accepted: 'unexpected',
      ended: 'ended',
      inFlight: 'inFlight',
      models: 'unexpected',
      rateLimited: 'held',
      notSent: 'unclear',
      ambiguous: 'unclear',
      refunded: 'ends',
      rejected: 'ends',
      batchStop: 'ends',
      notFound: 'ends',
      malformed: 'unclear',
      config: 'ends',
    });
    expect(pollStep(answers.models)).toEqual({ kind: 'unexpected', lastError: 'unexpected models answer to a poll' });
  });

  it('doubles the backoff from the base up to the maximum', () => {
    const config = { backoffBaseMs: 1000, backoffMaxMs: 5000 };
    expect([0, 1, 2, 3, 4, 40].map((n) => backoffCeilingMs(n, config))).toEqual([1000, 1000, 2000, 4000, 5000, 5000]);
  });
});
