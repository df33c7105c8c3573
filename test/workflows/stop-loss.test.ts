import { describe, expect, it } from 'vitest';
import { Breaker, CanaryPhase, KeyOutcome, type RowRecord, type RowState } from '../../src/model';
import { StopLoss, type StopLossState } from '../../src/workflows/stop-loss';
import { parseStopLoss } from '../../src/cli/stop-loss-option';
import { rowRecord } from '../helpers/records';

const SAFETY = 'Prompt rejected by the safety filter.';

/** A row that ended `state`; `failure` makes its last key end so, with the row's error the same (as is). */
function row(rowId: string, state: RowState, failure?: { outcome: KeyOutcome; error: string }): RowRecord {
  return rowRecord({
    batchId: 'b',
    rowId,
    state,
    creationIds: [`c-${rowId}`],
    keys: failure
      ? [{ attempt: 1, idempotencyKey: `k-${rowId}`, outcome: failure.outcome, error: failure.error }]
      : [{ attempt: 1, idempotencyKey: `k-${rowId}`, outcome: KeyOutcome.Succeeded, creationId: `c-${rowId}` }],
    ...(failure ? { error: failure.error } : {}),
  });
}

function running(options = {}, proven = false): { state: StopLossState; loss: StopLoss } {
  const state = StopLoss.start(options, proven);
  return { state, loss: new StopLoss(state, options) };
}

describe('stop-loss: the canary', () => {
  it('holds every other row while the first is in flight, and fans out once it succeeded, proof due once', () => {
    const { state, loss } = running();
    expect(state.canary).toBe(CanaryPhase.Next);
    expect(loss.holds()).toBeUndefined();
    loss.started('r1');
    expect(loss.holds()).toEqual({ kind: 'canary', rowId: 'r1' });
    loss.ended(row('r1', 'succeeded'));
    expect(loss.holds()).toBeUndefined();
    expect(state.canary).toBe(CanaryPhase.Passed);
    expect(loss.takeProof()).toEqual({ rowId: 'r1', creationId: 'c-r1' });
    expect(loss.takeProof()).toBeUndefined();
    loss.started('r2');
    expect(loss.holds()).toBeUndefined();
  });

  it('is skipped when the settings were proven, or switched off', () => {
    expect(running({}, true).state.canary).toBe(CanaryPhase.Proven);
    expect(running({ canary: false }).state.canary).toBe(CanaryPhase.Off);
    const { loss } = running({}, true);
    loss.started('r1');
    expect(loss.holds()).toBeUndefined();
  });

  it('a reused row proves nothing: the next row is the canary', () => {
    const { state, loss } = running();
    loss.started('r1');
    loss.ended(row('r1', 'reused'));
    expect(state.canary).toBe(CanaryPhase.Next);
    loss.started('r2');
    expect(loss.holds()).toEqual({ kind: 'canary', rowId: 'r2' });
  });

  it('trips when the canary ends in a state not understood, and a resume makes the next row the canary', () => {
    const { state, loss } = running();
    loss.started('r1');
    loss.ended(row('r1', 'images_unsaved', { outcome: KeyOutcome.Succeeded, error: 'image 0: HTTP 404' }));
    expect(loss.holds()).toMatchObject({ kind: 'stop_loss', trip: { breaker: Breaker.Canary, rowId: 'r1' } });
    expect(state.trip?.message).toContain('HTTP 404');
    loss.resumed();
    expect(loss.holds()).toBeUndefined();
    loss.started('r2');
    expect(loss.holds()).toEqual({ kind: 'canary', rowId: 'r2' });
  });

  it('failed canaries try the next row, up to canaryFailures, then trip', () => {
    const { loss } = running({ canaryFailures: 2, sameRejection: 0 });
    loss.started('r1');
    loss.ended(row('r1', 'failed', { outcome: KeyOutcome.Failed, error: SAFETY }));
    expect(loss.holds()).toBeUndefined();
    loss.started('r2');
    loss.ended(row('r2', 'failed', { outcome: KeyOutcome.Rejected, error: 'HTTP 400: model not found' }));
    expect(loss.holds()).toMatchObject({ kind: 'stop_loss', trip: { breaker: Breaker.Canary } });
  });
});

describe('stop-loss: the breakers', () => {
  const afterCanary = (options = {}) => running({ canary: false, ...options });

  it('the same failure, not to resubmit, N rows in a row; another row between starts the count afresh', () => {
    const { loss } = afterCanary({ sameRejection: 3 });
    const rejected = (id: string) => row(id, 'failed', { outcome: KeyOutcome.Rejected, error: 'model not found' });
    loss.ended(rejected('a'));
    loss.ended(rejected('b'));
    loss.ended(row('c', 'succeeded'));
    loss.ended(rejected('d'));
    loss.ended(rejected('e'));
    expect(loss.holds()).toBeUndefined();
    loss.ended(rejected('f'));
    expect(loss.holds()).toMatchObject({ trip: { breaker: Breaker.SameRejection, rowId: 'f' } });
  });

  it('a row that gave up after refunded failures is not a failure as is', () => {
    const { loss } = afterCanary({ sameRejection: 2 });
    for (const id of ['a', 'b', 'c']) {
      const r = row(id, 'failed', { outcome: KeyOutcome.Failed, error: 'Generation failed.' });
      loss.ended({ ...r, error: 'Generation failed. (gave up after 3 attempts)' });
    }
    expect(loss.holds()).toBeUndefined();
  });

  it('a share of the recent rows declined at generation', () => {
    const { state, loss } = afterCanary({ sameRejection: 0, declinedWindow: 4, declinedShare: 0.5 });
    loss.ended(row('a', 'failed', { outcome: KeyOutcome.Failed, error: SAFETY }));
    loss.ended(row('b', 'succeeded'));
    loss.ended(row('c', 'succeeded'));
    expect(loss.holds()).toBeUndefined(); // 1 of 3: the window is not full
    loss.ended(row('d', 'failed', { outcome: KeyOutcome.Failed, error: SAFETY }));
    expect(loss.holds()).toMatchObject({ trip: { breaker: Breaker.Declined } });
    expect(state.trip?.message).toContain('2 of the last 4');
  });

  it('unknown outcomes piling up, counted afresh after a resume', () => {
    const { loss } = afterCanary({ unknownRows: 2 });
    const unknown = (id: string) => row(id, 'unknown', { outcome: KeyOutcome.Unknown, error: 'no answer' });
    loss.ended(unknown('a'));
    expect(loss.holds()).toBeUndefined();
    loss.ended(unknown('b'));
    expect(loss.holds()).toMatchObject({ trip: { breaker: Breaker.Unknown } });
    loss.resumed();
    loss.ended(unknown('c'));
    expect(loss.holds()).toBeUndefined();
  });

  it('a charge above the price the cap counted, past the tolerance', () => {
    const { loss } = afterCanary({ priceTolerance: 0.1 });
    loss.ended(row('a', 'succeeded'), { model: 'm', chargedUsd: 0.043, countedUsd: 0.04 });
    expect(loss.holds()).toBeUndefined();
    loss.ended(row('b', 'succeeded'), { model: 'm', chargedUsd: 0.1, countedUsd: 0.04 });
    expect(loss.holds()).toMatchObject({ trip: { breaker: Breaker.PriceDiffers, rowId: 'b' } });
  });

  it('a breaker switched off never trips; the first trip stands until a resume', () => {
    const { loss } = afterCanary({ unknownRows: 1, off: [Breaker.Unknown] });
    loss.ended(row('a', 'unknown', { outcome: KeyOutcome.Unknown, error: 'x' }));
    expect(loss.holds()).toBeUndefined();
    const two = afterCanary({ unknownRows: 1 }).loss;
    two.ended(row('a', 'unknown', { outcome: KeyOutcome.Unknown, error: 'x' }));
    two.ended(row('b', 'succeeded'), { model: 'm', chargedUsd: 1, countedUsd: 0.04 });
    expect(two.holds()).toMatchObject({ trip: { breaker: Breaker.Unknown } });
  });
});

describe('--stop-loss', () => {
  it('reads name=value pairs, 0 or off switching a breaker off', () => {
    expect(parseStopLoss('canary=off,same-rejection=10,declined-share=0.3,unknown=0,price=off')).toEqual({
      value: {
        canary: false,
        sameRejection: 10,
        declinedShare: 0.3,
        unknownRows: 0,
        off: [Breaker.Unknown, Breaker.PriceDiffers],
      },
    });
    expect(parseStopLoss('off')).toEqual({ value: { canary: false, off: Object.values(Breaker) } });
  });

  it.each([
    ['canary', 'each entry must be name=value'],
    ['canary=maybe', 'canary must be on or off'],
    ['declined-share=2', 'declined-share must be a share from 0 to 1'],
    ['unknown=1.5', 'unknown must be a whole number'],
    ['declined-window=0', 'declined-window must be at least 1'],
    ['speed=3', 'unknown name "speed"'],
  ])('refuses %s, saying why', (raw, problem) => {
    const result = parseStopLoss(raw);
    expect('problem' in result && result.problem).toContain(problem);
  });
});
