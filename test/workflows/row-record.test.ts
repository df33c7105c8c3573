import { describe, expect, it } from 'vitest';
import { RowRecordBuilder } from '../../src/workflows/row-record';

/** The row's record as its keys end: the rules of the record, without Temporal. */
function builder(): RowRecordBuilder {
  return new RowRecordBuilder({ batchId: 'b', rowId: 'r', line: 2, request: { prompt: 'a fox', model: 'flux-dev' } });
}

describe('RowRecordBuilder', () => {
  it('a success keeps every key, creation and figure; it is not to be submitted again', () => {
    const l = builder();
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
    const l = builder();
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
    const filtered = builder();
    filtered.startKey(1, 'k1');
    filtered.creationFailed('c1', 0.04, 'Prompt rejected by the safety filter.', false);
    filtered.failedAsIs();
    expect(filtered.record).toMatchObject({ state: 'failed', resubmittable: false, netUsd: 0 });
    const rejected = builder();
    rejected.startKey(1, 'k1');
    rejected.rejected('Invalid request');
    expect(rejected.record).toMatchObject({ state: 'failed', resubmittable: false });
  });

  it('cancelled with a key in flight: that key is unknown, the row not resubmittable', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', resubmittable: false });
    expect(l.record.keys[0]).toMatchObject({ outcome: 'unknown' });
  });

  it('cancelled after an accepted creation: the key stays accepted and charged', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.learned({ creationId: 'c1', costUsd: 0.04 });
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', chargedUsd: 0.04, netUsd: 0.04, resubmittable: false });
    expect(l.record.keys[0]).toMatchObject({ outcome: 'accepted', creationId: 'c1' });
  });

  it('cancelled before any key: resubmittable', () => {
    const l = builder();
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', keys: [], resubmittable: true });
  });

  it('lagging 404s are counted on the key; a creation its key sent again made is an entry of its own, once', () => {
    const l = builder();
    l.startKey(1, 'k1');
    const replay = {
      state: 'other' as const,
      tried: 'answered 404 ERR_NOT_FOUND for 90 s (14 polls)',
      creationId: 'c2',
      costUsd: 0.04,
      message: 'the service did not keep the key',
    };
    l.learned({ creationId: 'c1', costUsd: 0.04, notFoundPolls: 14, notFoundReplay: replay });
    l.learned({ creationId: 'c1', notFoundReplay: replay });
    l.unknown('lost', 'creation c1 was accepted, then not found: the service did not keep the key');
    expect(l.record.keys.map((k) => [k.outcome, k.creationId, k.chargedUsd, k.notFoundPolls])).toEqual([
      ['duplicate', 'c2', 0.04, undefined],
      ['lost', 'c1', 0.04, 14],
    ]);
    expect(l.record).toMatchObject({ state: 'unknown', creationIds: ['c1', 'c2'], chargedUsd: 0.08, netUsd: 0.08 });
    expect(l.record.keys[0]?.error).toBe('the service did not keep the key');
  });

  it('a creation learned twice is listed once', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.learned({ creationId: 'c1' });
    l.learned({ creationId: 'c1', costUsd: 0.04 });
    l.succeeded('c1', undefined, []);
    expect(l.record.creationIds).toEqual(['c1']);
    expect(l.record.chargedUsd).toBe(0.04);
  });

  it('an unexpected error: unknown when a key may hold money, failed when none does', () => {
    const paid = builder();
    paid.startKey(1, 'k1');
    paid.broken('boom');
    expect(paid.record).toMatchObject({ state: 'unknown', resubmittable: false });
    const none = builder();
    none.broken('boom');
    expect(none.record).toMatchObject({ state: 'failed', resubmittable: true });
  });
});

describe('the money of a record: known, or unknown (never 0 for a price nobody showed)', () => {
  const priced = (source: 'catalog' | 'user') =>
    new RowRecordBuilder({
      batchId: 'b',
      rowId: 'r',
      request: { prompt: 'a fox', model: 'flux-dev' },
      price: { usd: 0.04, source },
    });

  it('no cost on the creation and no list price: charged and net are unknown', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.succeeded('c1', undefined, []);
    expect(l.record).toMatchObject({ chargedUsd: null, refundedUsd: 0, netUsd: null });
    expect(l.record.keys[0]!.priceSource).toBeUndefined();
  });

  it('a refunded key is refunded all of its charge: net 0 even when its price is unknown', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.refunded('HTTP 502 ERR_GENERATION_FAILED');
    l.startKey(2, 'k2');
    l.creationFailed('c2', undefined, 'Generation failed.', true);
    l.gaveUp(2);
    expect(l.record).toMatchObject({ chargedUsd: null, refundedUsd: null, netUsd: 0, resubmittable: true });
  });

  it('the list price stands in for a cost the creation did not show, and says where it came from', () => {
    const l = priced('user');
    l.startKey(1, 'k1');
    l.refunded('HTTP 503 ERR_PROVIDER_UNAVAILABLE');
    l.startKey(2, 'k2');
    l.succeeded('c2', undefined, []);
    expect(l.record).toMatchObject({ chargedUsd: 0.08, refundedUsd: 0.04, netUsd: 0.04 });
    expect(l.record.keys.map((k) => [k.outcome, k.chargedUsd, k.refundedUsd, k.priceSource])).toEqual([
      ['refunded', 0.04, 0.04, 'user'],
      ['succeeded', 0.04, undefined, 'user'],
    ]);
  });

  it("the creation's own cost comes first; a failed creation is refunded what it was charged", () => {
    const l = priced('catalog');
    l.startKey(1, 'k1');
    l.creationFailed('c1', 0.05, 'Generation failed.', true);
    l.startKey(2, 'k2');
    l.succeeded('c2', 0.05, []);
    expect(l.record.keys.map((k) => [k.chargedUsd, k.refundedUsd ?? 0, k.priceSource])).toEqual([
      [0.05, 0.05, 'creation'],
      [0.05, 0, 'creation'],
    ]);
    expect(l.record).toMatchObject({ chargedUsd: 0.1, refundedUsd: 0.05, netUsd: 0.05 });
  });

  it('a key of unknown outcome leaves the money unknown, even with a list price (it may or may not be charged)', () => {
    const l = priced('catalog');
    l.startKey(1, 'k1');
    l.unknown('unknown', 'no answer after 6 tries');
    expect(l.record).toMatchObject({ state: 'unknown', chargedUsd: null, refundedUsd: null, netUsd: null });
  });

  it('an accepted key (cancelled, timed out) holds its list price', () => {
    const l = priced('catalog');
    l.startKey(1, 'k1');
    l.learned({ creationId: 'c1' });
    l.cancelled('cancelled');
    expect(l.record).toMatchObject({ state: 'cancelled', chargedUsd: 0.04, netUsd: 0.04 });
  });

  it('refused keys cost nothing, priced or not', () => {
    const l = builder();
    l.startKey(1, 'k1');
    l.declined('insufficient balance');
    l.startKey(2, 'k2');
    l.rejected('HTTP 400 ERR_INVALID_REQUEST');
    expect(l.record).toMatchObject({ chargedUsd: 0, refundedUsd: 0, netUsd: 0 });
  });
});
