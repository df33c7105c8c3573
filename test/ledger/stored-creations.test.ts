import { describe, expect, it } from 'vitest';
import { recordWithStoredCreations, type LedgerKey } from '../../src/ledger';
import { KeyOutcome, RowState, rowMoney, type KeyRecord, type RowRecord } from '../../src/model';

/** A cancelled row's key put right by the creation the store knows it received (recordWithStoredCreations). */
const request = { prompt: 'a red kite', model: 'sdxl' };
const stored = (idempotencyKey: string, extra: Partial<LedgerKey> = {}): LedgerKey => ({
  batchId: 'b',
  rowId: 'r',
  idempotencyKey,
  firstSentAtMs: 1,
  request,
  requestSha256: 'body',
  fingerprint: 'fp',
  ...extra,
});
const recordOf = (state: RowState, keys: KeyRecord[]): RowRecord => ({
  batchId: 'b',
  rowId: 'r',
  prompt: request.prompt,
  model: request.model,
  state,
  keys,
  creationIds: [],
  images: [],
  resubmittable: false,
  error: 'cancelled',
  ...rowMoney(keys),
});
const open: KeyRecord = {
  attempt: 1,
  idempotencyKey: 'k1',
  outcome: KeyOutcome.Unknown,
  error: 'cancelled while its key was in flight: it may have been charged',
};

describe('a cancelled row and the creation its key received', () => {
  it('the key becomes accepted with its creation id and cost; the row counts the charge', () => {
    const known = new Map([['k1', stored('k1', { creationId: 'c1', costUsd: 0.02 })]]);
    const fixed = recordWithStoredCreations(recordOf(RowState.Cancelled, [open]), known);
    expect(fixed?.keys).toEqual([
      {
        attempt: 1,
        idempotencyKey: 'k1',
        outcome: KeyOutcome.Accepted,
        creationId: 'c1',
        chargedUsd: 0.02,
        priceSource: 'creation',
      },
    ]);
    expect(fixed?.creationIds).toEqual(['c1']);
    expect(fixed?.state).toBe(RowState.Cancelled);
    expect(fixed?.chargedUsd).toBe(0.02);
  });

  it('without a cost shown, the creation id alone; the charge stays unknown', () => {
    const known = new Map([['k1', stored('k1', { creationId: 'c1' })]]);
    const fixed = recordWithStoredCreations(recordOf(RowState.Cancelled, [open]), known);
    expect(fixed?.keys[0]).toMatchObject({ outcome: KeyOutcome.Accepted, creationId: 'c1' });
    expect(fixed?.keys[0]?.chargedUsd).toBeUndefined();
  });

  it('nothing changes when the store knows no creation, or the row was not cancelled', () => {
    expect(recordWithStoredCreations(recordOf(RowState.Cancelled, [open]), new Map([['k1', stored('k1')]]))).toBe(
      undefined,
    );
    const known = new Map([['k1', stored('k1', { creationId: 'c1' })]]);
    expect(recordWithStoredCreations(recordOf(RowState.Unknown, [open]), known)).toBeUndefined();
  });
});
