import type { MetricCounter, MetricMeter, MetricTags } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { classifyResponse, RequestKind, type FailureOutcome } from '../../src/api/classify';
import { toApplicationFailure } from '../../src/activities/failures';
import { describeAttempt, WorkerMetrics } from '../../src/metrics';
import { MetricName, TOO_MANY_REQUESTS_REASONS } from '../../src/metrics/names';

/**
 * Issue #16 point 6: a label value must come from a fixed set. The service's `details.reason` of a 429 became the
 * `reason` label as it was: 5,000 hostile 429s made 5,000 series.
 */

/** A meter that keeps every label set each counter was given. */
function recordingMeter() {
  const seen = new Map<string, MetricTags[]>();
  const meter = {
    createCounter(name: string): MetricCounter {
      const tags: MetricTags[] = [];
      seen.set(name, tags);
      return { add: (_v: number, extra?: MetricTags) => void tags.push(extra ?? {}) } as unknown as MetricCounter;
    },
  } as unknown as MetricMeter;
  const values = (name: string, label: string) => new Set((seen.get(name) ?? []).map((t) => String(t[label])));
  return { meter, values };
}

/** A 429 as the service sends it, through the classifier, the failure the activity throws and the interceptor's count. */
function count429(metrics: WorkerMetrics, code: string, details: unknown) {
  const outcome = classifyResponse({
    kind: RequestKind.Submit,
    status: 429,
    headers: { 'retry-after': '1' },
    body: JSON.stringify({ error: { code, message: 'slow down', details } }),
    nowMs: 0,
    successStatuses: ['succeeded'],
    costFields: [],
    priceFields: [],
    defaultRetryAfterMs: 1000,
  });
  const failure = toApplicationFailure(outcome as FailureOutcome);
  metrics.record('submitCreation', describeAttempt('submitCreation', { ok: false, error: failure }));
}

describe('metric labels from a fixed set (issue #16 point 6)', () => {
  it('5,000 distinct 429 reasons (and codes) make no more reason values than the fixed set and other', () => {
    const { meter, values } = recordingMeter();
    const metrics = new WorkerMetrics(meter);
    for (let i = 0; i < 5000; i++) {
      count429(metrics, 'ERR_QUOTA_EXCEEDED', { scope: 'account', reason: `hostile_${i}` });
      // No reason: the label falls back to the code, which is the service's text too.
      count429(metrics, `ERR_HOSTILE_${i}`, {});
    }
    const reasons = values(MetricName.TooManyRequests, 'reason');
    expect(reasons.size).toBeLessThanOrEqual(TOO_MANY_REQUESTS_REASONS.length + 1);
    expect([...reasons]).toEqual(['other']);
    // The other labels of every counter stay small too.
    expect(values(MetricName.ApiRequests, 'class').size).toBe(1);
    expect(values(MetricName.ActivityRetries, 'reason').size).toBe(1);
  });

  it('keeps the documented reasons and codes as they are', () => {
    const { meter, values } = recordingMeter();
    const metrics = new WorkerMetrics(meter);
    for (const reason of ['rate_limit', 'min_poll_interval', 'concurrency_limit', 'capacity']) {
      count429(metrics, 'ERR_QUOTA_EXCEEDED', { reason });
    }
    count429(metrics, 'ERR_RATE_LIMIT', {});
    count429(metrics, 'ERR_QUOTA_EXCEEDED', 'not an object');
    expect(values(MetricName.TooManyRequests, 'reason')).toEqual(
      new Set([
        'rate_limit',
        'min_poll_interval',
        'concurrency_limit',
        'capacity',
        'ERR_RATE_LIMIT',
        'ERR_QUOTA_EXCEEDED',
      ]),
    );
  });

  it('a retry reason that is not a failure type or a plain error name is other', () => {
    const { meter, values } = recordingMeter();
    const metrics = new WorkerMetrics(meter);
    for (let i = 0; i < 1000; i++) {
      const err = new Error('x');
      err.name = `Hostile${i}`;
      metrics.record('submitCreation', describeAttempt('submitCreation', { ok: false, error: err }));
    }
    metrics.record('submitCreation', describeAttempt('submitCreation', { ok: false, error: new TypeError('x') }));
    expect(values(MetricName.ActivityRetries, 'reason')).toEqual(new Set(['other', 'TypeError']));
  });
});
