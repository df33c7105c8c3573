import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordAgainstLedger, type LedgerStore, type NewLedgerEvent } from '../../src/ledger';
import type { RowRecord } from '../../src/model';
import { tempLedger } from '../helpers/ledger';

let store: LedgerStore;
beforeEach(async () => {
  store = await tempLedger();
});
afterEach(async () => {
  await store.close();
});

const request = { prompt: 'p', model: 'm' };
const sending = (rowId: string, attempt = 1): NewLedgerEvent => ({
  type: 'sending',
  batchId: 'b',
  rowId,
  idempotencyKey: `ib/b/${rowId}/a${attempt}`,
  request,
  requestSha256: 'body',
  fingerprint: 'print',
});

describe('a record against the ledger', () => {
  it('a record that leaves out a key the ledger says may hold money gives way to the ledger', async () => {
    // A row run again with fewer attempts gave up after key 1 (refunded), while the ledger knows its key 2 succeeded.
    await store.append([
      sending('r'),
      { type: 'ended', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a1', outcome: 'refunded', error: '503' },
      sending('r', 2),
      { type: 'accepted', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a2', creationId: 'cr_2', costUsd: 0.04 },
    ]);
    const known = (await store.row('b', 'r'))!;
    const gaveUp: RowRecord = {
      batchId: 'b',
      rowId: 'r',
      state: 'failed',
      prompt: 'p',
      model: 'm',
      keys: [{ attempt: 1, idempotencyKey: 'ib/b/r/a1', outcome: 'refunded' }],
      creationIds: [],
      images: [],
      chargedUsd: 0,
      refundedUsd: 0,
      netUsd: 0,
      resubmittable: true,
    };
    const merged = recordAgainstLedger(gaveUp, known);
    expect(merged.state).toBe('unknown');
    expect(merged.resubmittable).toBe(false);
    expect(merged.keys.map((k) => [k.idempotencyKey, k.outcome])).toEqual([
      ['ib/b/r/a1', 'refunded'],
      ['ib/b/r/a2', 'accepted'],
    ]);
    // A record that lists every such key is kept as it is.
    const complete = {
      ...gaveUp,
      keys: [...gaveUp.keys, { attempt: 2, idempotencyKey: 'ib/b/r/a2', outcome: 'accepted' as const }],
    };
    expect(recordAgainstLedger(complete, known)).toBe(complete);
  });
});
