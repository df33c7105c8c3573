import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toApplicationFailure } from '../../src/activities/failures';
import { FailureType } from '../../src/model';
import { loadMetricsConfig } from '../../src/config/metrics-config';
import { ConfigError } from '../../src/config/service-config';
import { describeAttempt } from '../../src/metrics';

/** What an attempt that threw this failure observed. */
const failed = (activity: string, error: unknown) => describeAttempt(activity, { ok: false, error });

/**
 * The failure as createImage throws it: the same type, message and first detail, with what is known of the key as
 * its second detail (a known creation means the attempt sent a poll, else the submission).
 */
function ofKey(failure: ApplicationFailure, progress: Record<string, unknown>): ApplicationFailure {
  return ApplicationFailure.create({
    ...(failure.type ? { type: failure.type } : {}),
    message: failure.message,
    nonRetryable: failure.nonRetryable ?? false,
    details: [failure.details?.[0] ?? null, progress],
  });
}
const polling = { creationId: 'c1', acceptedAtMs: 1, costUsd: 0.04 };

describe('describeAttempt', () => {
  it('counts an accepted submission as a 2xx request and a charge of its cost', () => {
    expect(describeAttempt('submitCreation', { ok: true, result: { creationId: 'c1', costUsd: 0.04 } })).toEqual({
      request: { kind: 'submit', class: '2xx' },
      charge: { usd: 0.04 },
    });
  });

  it('counts a submission accepted by createImage as a 2xx submission and a charge of its cost', () => {
    const accepted = ApplicationFailure.create({
      type: FailureType.Pending,
      message: 'creation c1 accepted (status queued)',
      nonRetryable: false,
      nextRetryDelay: 2000,
      details: [
        { status: 'queued', accepted: true },
        { creationId: 'c1', acceptedAtMs: 1, costUsd: 0.04 },
      ],
    });
    expect(failed('createImage', accepted)).toEqual({
      request: { kind: 'submit', class: '2xx' },
      charge: { usd: 0.04 },
      retry: FailureType.Pending,
    });
    // A cost the service did not say is a charge of 0, still one charge.
    const unpriced = ApplicationFailure.create({
      type: FailureType.Pending,
      message: 'creation c1 accepted (status queued)',
      details: [
        { status: 'queued', accepted: true },
        { creationId: 'c1', acceptedAtMs: 1 },
      ],
    });
    expect(failed('createImage', unpriced).charge).toEqual({ usd: 0 });
  });

  it('counts a failed creation, from createImage or poll, as a refund', () => {
    const poll = { outcome: 'failed', status: 'failed', error: 'safety filter', retryable: false };
    const ended = { outcome: 'failed', creationId: 'c1', costUsd: 0.04, error: 'safety filter', retryable: false };
    expect(describeAttempt('createImage', { ok: true, result: ended })).toEqual({
      request: { kind: 'poll', class: '2xx' },
      refund: 'failed_creation',
    });
    expect(describeAttempt('pollCreation', { ok: true, result: poll }).refund).toBe('failed_creation');
    const succeeded = { outcome: 'succeeded', creationId: 'c1', costUsd: 0.04, images: [] };
    expect(describeAttempt('createImage', { ok: true, result: succeeded })).toEqual({
      request: { kind: 'poll', class: '2xx' },
    });
  });

  it('reads a 429 with its reason, a local hold, and a 503 on a poll from the RateLimited failure', () => {
    const tooMany = toApplicationFailure({
      kind: 'rateLimited',
      httpStatus: 429,
      code: 'ERR_RATE_LIMITED',
      message: 'slow down',
      retryAfterMs: 1000,
      reason: 'rate_limit',
    });
    expect(failed('submitCreation', tooMany)).toEqual({
      request: { kind: 'submit', class: '4xx' },
      tooManyRequests: 'rate_limit',
      retry: FailureType.RateLimited,
    });
    const local = toApplicationFailure({
      kind: 'rateLimited',
      httpStatus: 0,
      code: 'LOCAL_HOLD',
      message: 'held',
      retryAfterMs: 500,
      local: true,
    });
    expect(failed('createImage', ofKey(local, polling))).toEqual({
      request: { kind: 'poll', class: 'local_hold' },
      retry: FailureType.RateLimited,
    });
    // createImage's own wait for the minimum poll interval is a local hold too, and sends nothing.
    const interval = toApplicationFailure({
      kind: 'rateLimited',
      httpStatus: 0,
      code: 'MIN_POLL_INTERVAL',
      message: 'the previous poll was 200 ms ago',
      retryAfterMs: 300,
      local: true,
    });
    expect(failed('createImage', ofKey(interval, polling))).toEqual({
      request: { kind: 'poll', class: 'local_hold' },
      retry: FailureType.RateLimited,
    });
    // A 429 on createImage's submission (no creation known yet) is a submission's.
    expect(failed('createImage', ofKey(tooMany, {}))).toEqual({
      request: { kind: 'submit', class: '4xx' },
      tooManyRequests: 'rate_limit',
      retry: FailureType.RateLimited,
    });
    const busy = toApplicationFailure({
      kind: 'rateLimited',
      httpStatus: 503,
      code: 'ERR_X',
      message: 'busy',
      retryAfterMs: 2000,
    });
    expect(failed('pollCreation', busy)).toEqual({
      request: { kind: 'poll', class: '5xx' },
      retry: FailureType.RateLimited,
    });
    expect(failed('createImage', ofKey(busy, polling))).toEqual({
      request: { kind: 'poll', class: '5xx' },
      retry: FailureType.RateLimited,
    });
  });

  it('tells a 500 from a transport failure, also on the last try of an unknown outcome', () => {
    const http500 = toApplicationFailure({ kind: 'ambiguous', httpStatus: 500, lastError: 'HTTP 500 ERR_INTERNAL: x' });
    expect(failed('submitCreation', http500)).toEqual({
      request: { kind: 'submit', class: '5xx' },
      retry: FailureType.Ambiguous,
    });
    const reset = toApplicationFailure({ kind: 'ambiguous', lastError: 'ECONNRESET' });
    expect(failed('submitCreation', reset).request?.class).toBe('transport');
    const unknown500 = toApplicationFailure({
      kind: 'unknown',
      details: { idempotencyKey: 'k', tries: 6, lastError: 'HTTP 500 ERR_INTERNAL: x' },
    });
    expect(failed('submitCreation', unknown500)).toEqual({ request: { kind: 'submit', class: '5xx' } });
    const unknownReset = toApplicationFailure({
      kind: 'unknown',
      details: { idempotencyKey: 'k', tries: 6, lastError: 'socket hang up' },
    });
    expect(failed('submitCreation', unknownReset).request?.class).toBe('transport');
    // The same through createImage: its submission while no creation is known, its poll after.
    expect(failed('createImage', ofKey(unknown500, { ambiguousTries: 0 }))).toEqual({
      request: { kind: 'submit', class: '5xx' },
    });
    expect(failed('createImage', ofKey(reset, polling))).toEqual({
      request: { kind: 'poll', class: 'transport' },
      retry: FailureType.Ambiguous,
    });
  });

  it('counts a refused submission as a 5xx and a refund, and handled answers without a retry', () => {
    const refunded = toApplicationFailure({
      kind: 'refunded',
      details: { httpStatus: 503, code: 'ERR_PROVIDER_UNAVAILABLE', message: 'down', retryAfterMs: 2000 },
    });
    expect(failed('submitCreation', refunded)).toEqual({
      request: { kind: 'submit', class: '5xx' },
      refund: 'refused_submission',
    });
    const rejected = toApplicationFailure({
      kind: 'rejected',
      details: { httpStatus: 404, code: 'ERR_MODEL_NOT_FOUND', message: 'no', fieldErrors: [] },
    });
    expect(failed('submitCreation', rejected)).toEqual({ request: { kind: 'submit', class: '4xx' } });
    const stop = toApplicationFailure({
      kind: 'batchStop',
      details: { reason: 'insufficient_balance', httpStatus: 402, message: 'top up' },
    });
    expect(failed('submitCreation', stop)).toEqual({ request: { kind: 'submit', class: '4xx' } });
    // The same answers to createImage's submission.
    expect(failed('createImage', ofKey(refunded, {}))).toEqual({
      request: { kind: 'submit', class: '5xx' },
      refund: 'refused_submission',
    });
    expect(failed('createImage', ofKey(rejected, {}))).toEqual({ request: { kind: 'submit', class: '4xx' } });
    expect(failed('createImage', ofKey(stop, {}))).toEqual({ request: { kind: 'submit', class: '4xx' } });
  });

  it('counts a poll of a creation in flight as a 2xx and a Pending retry; a local config problem sends nothing', () => {
    const inFlight = toApplicationFailure({ kind: 'inFlight', status: 'running' }, 500);
    expect(failed('createImage', ofKey(inFlight, polling))).toEqual({
      request: { kind: 'poll', class: '2xx' },
      retry: FailureType.Pending,
    });
    expect(failed('pollCreation', inFlight)).toEqual({
      request: { kind: 'poll', class: '2xx' },
      retry: FailureType.Pending,
    });
    expect(failed('submitCreation', toApplicationFailure({ kind: 'config', message: 'bad key' }))).toEqual({});
    expect(failed('createImage', ofKey(toApplicationFailure({ kind: 'config', message: 'bad key' }), {}))).toEqual({});
    // The maximum wait is checked before the poll: nothing sent, nothing retried.
    const maxWait = ApplicationFailure.create({
      type: FailureType.MaxWait,
      message: 'creation c1 did not end within the maximum wait',
      nonRetryable: true,
      details: [{ maxPollWaitMs: 60_000 }],
    });
    expect(failed('createImage', ofKey(maxWait, polling))).toEqual({});
  });

  it('counts retries of any activity, never a cancellation, and no request for activities that send none', () => {
    expect(failed('readBatchPage', new Error('EIO'))).toEqual({ retry: 'Error' });
    expect(failed('readBatchPage', ApplicationFailure.nonRetryable('bad file', 'Batch.Invalid'))).toEqual({});
    expect(failed('submitCreation', new CancelledFailure('cancelled'))).toEqual({
      request: { kind: 'submit', class: 'unclassified' },
    });
    expect(describeAttempt('readBatchPage', { ok: true, result: { rows: [] } })).toEqual({});
  });
});

describe('loadMetricsConfig', () => {
  it('is off when unset or empty, and takes host:port', () => {
    expect(loadMetricsConfig({})).toBeUndefined();
    expect(loadMetricsConfig({ IMAGEBATCH_METRICS_ADDRESS: '  ' })).toBeUndefined();
    expect(loadMetricsConfig({ IMAGEBATCH_METRICS_ADDRESS: '0.0.0.0:9464' })).toEqual({ bindAddress: '0.0.0.0:9464' });
    expect(loadMetricsConfig({ IMAGEBATCH_METRICS_ADDRESS: '[::1]:9464' })).toEqual({ bindAddress: '[::1]:9464' });
  });

  it.each(['9464', 'localhost', 'http://0.0.0.0:9464', '0.0.0.0:0', '0.0.0.0:70000', '0.0.0.0:94a'])(
    'names the variable for %j',
    (value) => {
      const err = (() => {
        try {
          loadMetricsConfig({ IMAGEBATCH_METRICS_ADDRESS: value });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).variable).toBe('IMAGEBATCH_METRICS_ADDRESS');
      expect((err as ConfigError).message).toContain(JSON.stringify(value));
    },
  );
});
