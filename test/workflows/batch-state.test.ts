import { describe, expect, it } from 'vitest';
import { LIMIT_MEMORY_MS } from '../../src/model';
import { applyRowDone, committedUsd, newBatchState, progressOf } from '../../src/workflows/batch-state';
import { rowRecord } from '../helpers/records';

/** The batch's spend figures: the sum of its rows', unknown counted apart, reservations released at each end. */
describe('batch state: spend, reservations, unknowns', () => {
  it('a known net counts, an unknown one is counted apart at its reservation, a refund releases its reservation', () => {
    const s = newBatchState(0);
    s.inFlight = { a: 0.04, b: 0.04, c: 0.04, d: null };
    s.unpriced = { d: { model: 'm', images: 2 } };
    applyRowDone(s, rowRecord({ batchId: 'x', rowId: 'a', state: 'succeeded', chargedUsd: 0.04, netUsd: 0.04 }));
    applyRowDone(s, rowRecord({ batchId: 'x', rowId: 'b', state: 'failed', chargedUsd: 0.04, refundedUsd: 0.04 }));
    expect(committedUsd(s)).toBe(0.04 + 0.04 + 0); // spent a, reserved c (d has no price)
    applyRowDone(s, rowRecord({ batchId: 'x', rowId: 'c', state: 'unknown', chargedUsd: null, netUsd: null }));
    applyRowDone(s, rowRecord({ batchId: 'x', rowId: 'd', state: 'succeeded', chargedUsd: null, netUsd: null }));
    // A replayed report changes nothing.
    expect(applyRowDone(s, rowRecord({ batchId: 'x', rowId: 'a', state: 'succeeded', netUsd: 0.04 }))).toBe(false);
    expect(s).toMatchObject({
      spentUsd: 0.04,
      refundedUsd: 0.04,
      unknownSpendRows: 2,
      unknownSpendAtMostUsd: 0.04,
      unpricedEnded: { m: 2 },
      inFlight: {},
    });
    expect(committedUsd(s)).toBe(0.08);
    expect(progressOf('x', s, 1000, undefined, true, 0.1)).toMatchObject({
      spentUsd: 0.04,
      unknownSpendRows: 2,
      reservedUsd: 0,
      unpricedInFlight: 0,
      spendCapUsd: 0.1,
      leftUsd: 0.02,
    });
  });
});

describe('batch progress: the limit that binds', () => {
  it('shows the limit the latest row reported for LIMIT_MEMORY_MS of workflow time, and never once done', () => {
    const s = newBatchState(0);
    const seen = { limit: 'rate', atMs: 10_000 } as const;
    expect(progressOf('x', s, 10_000, undefined, false, undefined, undefined).limit).toBeUndefined();
    expect(progressOf('x', s, 10_000, undefined, false, undefined, seen).limit).toBe('rate');
    expect(progressOf('x', s, 10_000 + LIMIT_MEMORY_MS, undefined, false, undefined, seen).limit).toBe('rate');
    expect(progressOf('x', s, 10_001 + LIMIT_MEMORY_MS, undefined, false, undefined, seen).limit).toBeUndefined();
    expect(progressOf('x', s, 10_000, undefined, true, undefined, seen).limit).toBeUndefined();
  });
});
