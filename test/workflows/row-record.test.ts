import { describe, expect, it } from 'vitest';
import { RowLedger } from '../../src/workflows/row-record';

/** The row's record as its keys end: the rules of the record, without Temporal. */
function ledger(): RowLedger {
  return new RowLedger({ batchId: 'b', rowId: 'r', line: 2, request: { prompt: 'a fox', model: 'flux-dev' } });
}

describe('RowLedger', () => {
  it('a success keeps every key, creation and figure; it is not to be submitted again', () => {
    const l = ledger();
    l.startKey(1, 'k1');
    l.creationFailed('c1', 0.04, 'Generation failed.', true);
    l.startKey(2, 'k2');
    l.succeeded('c2', 0.04, [{ url: 'u', path: 'p', sha256: 's', bytes: 1 }]);
    expect(l.record).toMatchObject({
      state: 'succeeded',
      creationIds: ['c1', 'c2'],
      chargedUsd: 0.08,
      refundedUsd: 0.04,
      netUsd: 0.04,
      resubmittable: false,
    });
    expect(l.record.error).toBeUndefined();
    expect(l.record.keys.map((k) => [k.idempotencyKey, k.outcome])).toEqual([
      ['k1', 'failed'],
      ['k2', 'succeeded'],
    ]);
  });

  it('refunded and refused keys only: failed, and it may be submitted again', () => {
    const l = ledger();
    l.startKey(1, 'k1');
    l.refunded('HTTP 503 ERR_PROVIDER_UNAVAILABLE');
    l.startKey(2, 'k2');
    l.declined('insufficient balance');
    l.startKey(3, 'k3');
    l.creationFailed('c3', 0.04, 'Provider returned no image.', true);
    l.gaveUp(2);
    expect(l.record).toMatchObject({ state: 'failed', netUsd: 0, resubmittable: true });
    expect(l.record.error).toContain('gave up after 2 attempts');
  });

  it('the safety filter or a rejection: failed, not to be submitted again as it is', () => {
    const filtered = ledger();
    filtered.startKey(1, 'k1');
    filtered.creationFailed('c1', 0.04, 'Prompt rejected by the safety filter.', false);
    filtered.failedAsIs();
    expect(filtered.record).toMatchObject({ state: 'failed', resubmittable: false, netUsd: 0 });
    const rejected = ledger();
    rejected.startKey(1, 'k1');
    rejected.rejected('Invalid request');
    expect(rejected.record).toMatchObject({ state: 'failed', resubmittable: false });
  });

  it('cancelled with a key in flight: that key is unknown, the row not resubmittable', () => {
    const l = ledger();
    l.startKey(1, 'k1');
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', resubmittable: false });
    expect(l.record.keys[0]).toMatchObject({ outcome: 'unknown' });
  });

  it('cancelled after an accepted creation: the key stays accepted and charged', () => {
    const l = ledger();
    l.startKey(1, 'k1');
    l.learned({ creationId: 'c1', costUsd: 0.04 });
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', chargedUsd: 0.04, netUsd: 0.04, resubmittable: false });
    expect(l.record.keys[0]).toMatchObject({ outcome: 'accepted', creationId: 'c1' });
  });

  it('cancelled before any key: resubmittable', () => {
    const l = ledger();
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', keys: [], resubmittable: true });
  });

  it('a creation learned twice is listed once', () => {
    const l = ledger();
    l.startKey(1, 'k1');
    l.learned({ creationId: 'c1' });
    l.learned({ creationId: 'c1', costUsd: 0.04 });
    l.succeeded('c1', undefined, []);
    expect(l.record.creationIds).toEqual(['c1']);
    expect(l.record.chargedUsd).toBe(0.04);
  });

  it('an unexpected error: unknown when a key may hold money, failed when none does', () => {
    const paid = ledger();
    paid.startKey(1, 'k1');
    paid.broken('boom');
    expect(paid.record).toMatchObject({ state: 'unknown', resubmittable: false });
    const none = ledger();
    none.broken('boom');
    expect(none.record).toMatchObject({ state: 'failed', resubmittable: true });
  });
});
