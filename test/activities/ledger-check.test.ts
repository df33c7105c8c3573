import { describe, expect, it } from 'vitest';
import { compare } from '../../src/activities/ledger-check';
import type { LedgerKey } from '../../src/ledger';
import { KeyOutcome, type PollCreationResult } from '../../src/model';

/** How `ledger check` judges the service's answer for a key's creation against the store. */
const key = (fields: Partial<LedgerKey> = {}): LedgerKey => ({
  batchId: 'b',
  rowId: 'r',
  idempotencyKey: 'ib/b/r/a1',
  firstSentAtMs: 0,
  request: { prompt: 'p', model: 'm' },
  requestSha256: 'x',
  fingerprint: 'y',
  creationId: 'cr_1',
  costUsd: 0.04,
  ended: { outcome: KeyOutcome.Succeeded, creationId: 'cr_1' },
  ...fields,
});
const succeeded = (costUsd?: number): PollCreationResult => ({
  outcome: 'succeeded',
  status: 'succeeded',
  images: [],
  ...(costUsd === undefined ? {} : { costUsd }),
});

describe('ledger check: the service against the store, for one key', () => {
  it('agrees when both say the same, to the cent', () => {
    expect(compare(key(), succeeded(0.04))).toBeUndefined();
    expect(compare(key(), succeeded(0.0449))).toBeUndefined();
    expect(compare(key(), succeeded())).toBeUndefined(); // the service shows no cost: nothing to compare
    expect(
      compare(key({ ended: { outcome: KeyOutcome.Failed } }), {
        outcome: 'failed',
        status: 'failed',
        error: 'x',
        retryable: true,
      }),
    ).toBeUndefined();
    expect(compare(key({ ended: undefined }), 'inFlight')).toBeUndefined();
  });

  it('names a cost that differs, an outcome that differs, a creation the service does not know', () => {
    expect(compare(key(), succeeded(0.05))?.problem).toBe('the store says it cost $0.04, the service $0.05');
    expect(compare(key({ ended: { outcome: KeyOutcome.Failed } }), succeeded())?.problem).toContain('it succeeded');
    expect(compare(key(), { outcome: 'failed', status: 'failed', error: 'nsfw', retryable: false })?.problem).toBe(
      'the store says the creation succeeded, the service that it failed (nsfw)',
    );
    expect(compare(key(), 'notFound')?.problem).toBe('the service does not know creation cr_1');
    expect(compare(key(), 'inFlight')?.problem).toContain('still in flight');
  });

  it('a creation that ended while the store still has it in flight points at reconcile', () => {
    const finding = compare(key({ ended: undefined }), succeeded(0.04));
    expect(finding).toMatchObject({ batchId: 'b', idempotencyKey: 'ib/b/r/a1', creationId: 'cr_1' });
    expect(finding?.problem).toBe(
      'the creation has ended (succeeded), the store does not know it yet: imagebatch reconcile b',
    );
  });
});
