import { describe, expect, it } from 'vitest';
import { CanaryPhase, KeyOutcome, type KeyCheck, type RowState } from '../../src/model';
import { RowRecordBuilder } from '../../src/workflows/row-record';
import { StopLoss } from '../../src/workflows/stop-loss';

/**
 * The canary that proves the key (patch `canary-proves-key`), without Temporal: its record, built as the row builds
 * it, passes only when its check says honoured; otherwise the batch pauses before any other row, saying why, what
 * the check paid, and what to do. A canary started without the flag keeps today's rule.
 */
const CARRIER = 'header Idempotency-Key';
const honoured: KeyCheck = { result: 'honoured', carrier: CARRIER, message: `the key at ${CARRIER} was honoured` };
const FIX = 'set IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD to where the service reads the key';
const duplicated: KeyCheck = {
  result: 'not_honoured',
  carrier: CARRIER,
  message: `the service did not honour the idempotency key at ${CARRIER}: every retry may pay twice; the check paid a second creation cr_2`,
  advice: FIX,
  duplicate: { creationId: 'cr_2' },
};

/** The canary's record: its key accepted as cr_1, checked, then its creation succeeded. */
function canary(check: KeyCheck | undefined, price = { usd: 0.04, source: 'catalog' as const }) {
  const builder = new RowRecordBuilder({
    batchId: 'b',
    rowId: 'r1',
    request: { prompt: 'p', model: 'flux-dev' },
    price,
  });
  builder.startKey(1, 'ib/b/r1/a1');
  builder.learned({ creationId: 'cr_1', ...(check ? { keyCheck: check } : {}) });
  builder.succeeded('cr_1', undefined, [{ url: 'u', path: 'r1.png', sha256: 'x', bytes: 1 }]);
  return builder.record;
}

function started(provesKey: boolean) {
  const state = StopLoss.start();
  const loss = new StopLoss(state);
  expect(loss.started('r1', () => provesKey)).toBe(provesKey);
  return { state, loss };
}

describe('stop-loss: a canary that proves the key', () => {
  it('passes when its key was honoured, and its proof is due', () => {
    const { state, loss } = started(true);
    loss.ended(canary(honoured));
    expect(state.canary).toBe(CanaryPhase.Passed);
    expect(loss.takeProof()).toEqual({ rowId: 'r1', creationId: 'cr_1' });
  });

  it('pauses the batch when the key was not honoured: the second creation, its charge, and what to do', () => {
    const { state, loss } = started(true);
    const record = canary(duplicated);
    // The record keeps the second creation as an entry of its own, before the key, at the list price.
    expect(record.keys.map((k) => [k.outcome, k.creationId, k.chargedUsd])).toEqual([
      [KeyOutcome.Duplicate, 'cr_2', 0.04],
      [KeyOutcome.Succeeded, 'cr_1', 0.04],
    ]);
    expect(record).toMatchObject({ state: 'succeeded', chargedUsd: 0.08, netUsd: 0.08, creationIds: ['cr_1', 'cr_2'] });
    loss.ended(record);
    expect(loss.holds()).toEqual({
      kind: 'stop_loss',
      trip: {
        breaker: 'canary',
        rowId: 'r1',
        message:
          `the service did not honour the idempotency key at ${CARRIER}: every retry may pay twice; the check paid a ` +
          `second creation cr_2 ($0.04). ${FIX}`,
      },
    });
    expect(loss.takeProof()).toBeUndefined();
    // After the resume the next row is sent alone, and proves the key again.
    expect(state.canary).toBe(CanaryPhase.Next);
    loss.resumed();
    expect(loss.started('r2', () => true)).toBe(true);
    expect(loss.holds()).toEqual({ kind: 'canary', rowId: 'r2' });
  });

  it("says a second creation's charge is not known when neither it nor a list price shows it", () => {
    const { loss } = started(true);
    const builder = new RowRecordBuilder({ batchId: 'b', rowId: 'r1', request: { prompt: 'p', model: 'm' } });
    builder.startKey(1, 'ib/b/r1/a1');
    builder.learned({ creationId: 'cr_1', costUsd: 0.04, keyCheck: duplicated });
    builder.succeeded('cr_1', 0.04, [{ url: 'u', path: 'r1.png', sha256: 'x', bytes: 1 }]);
    expect(builder.record.chargedUsd).toBeNull();
    loss.ended(builder.record);
    expect(loss.holds()).toMatchObject({
      trip: { message: expect.stringContaining('cr_2 (its charge not known)') as unknown },
    });
  });

  it.each<[string, RowState]>([
    ['succeeded', 'succeeded'],
    ['failed', 'failed'],
  ])('pauses when the check was unclear, the row %s, saying it could not be proven', (_, state) => {
    const { loss } = started(true);
    const unclear: KeyCheck = {
      result: 'unclear',
      carrier: CARRIER,
      message: `the idempotency key at ${CARRIER} could not be proven honoured: its second send got no answer`,
      advice: 'resume to send the next row alone and try again',
    };
    loss.ended({ ...canary(unclear), state });
    expect(loss.holds()).toMatchObject({
      kind: 'stop_loss',
      trip: { message: expect.stringContaining('could not be proven honoured') as unknown },
    });
  });

  it('a canary with no check (its end from the store, nothing sent) proves nothing: the next row is the canary', () => {
    const { state, loss } = started(true);
    loss.ended(canary(undefined));
    expect(state.canary).toBe(CanaryPhase.Next);
    expect(loss.holds()).toBeUndefined();
    expect(loss.takeProof()).toBeUndefined();
  });

  it('a canary started without the flag (a batch whose canary began before the patch) passes as before', () => {
    const { state, loss } = started(false);
    loss.ended(canary(undefined));
    expect(state.canary).toBe(CanaryPhase.Passed);
    expect(loss.takeProof()).toEqual({ rowId: 'r1', creationId: 'cr_1' });
  });

  it('only a canary is asked whether it proves the key', () => {
    const { loss } = started(true);
    loss.ended(canary(honoured));
    let asked = false;
    expect(
      loss.started('r2', () => {
        asked = true;
        return true;
      }),
    ).toBe(false);
    expect(asked).toBe(false);
  });
});
