import { describe, expect, it } from 'vitest';
import { BatchStopReason, KeyOutcome, type BatchRowInput, type KeyRecord, type PriceSource } from '../../src/model';
import type { BatchWorkflowInput } from '../../src/workflows/batch-input';
import { BatchRun } from '../../src/workflows/batch-run';
import { rowRecord } from '../helpers/records';

/** What a batch's run decides between its commands, without Temporal: the workflow only wires these methods. */
function batchRun(given: Partial<BatchWorkflowInput> = {}, now = () => 0): BatchRun {
  return new BatchRun({ batchId: 'b', file: 'f.csv', outDir: 'out', ...given }, now, true);
}

/** A succeeded key charged $0.01, its price from `priceSource`. */
function key(priceSource: PriceSource): KeyRecord {
  return { attempt: 1, idempotencyKey: 'k', outcome: KeyOutcome.Succeeded, chargedUsd: 0.01, priceSource };
}

function row(rowId: string, model = 'm'): BatchRowInput {
  return { rowId, line: 2, request: { prompt: 'a fox', model } };
}

describe('BatchRun', () => {
  it('a cap holds a row whose price nobody gave and names its model; a price given on resume lets it start', () => {
    const run = batchRun({ spendCapUsd: 1 });
    const hold = run.prices.spendCapHold(row('r1'));
    expect(hold).toEqual({ kind: 'price_unknown', capUsd: 1, models: ['m'] });
    expect(run.prices.capHoldText(hold!)).toContain('resume with --price m=<usd per image>');
    run.resume({ prices: { m: 0.04 } });
    expect(run.prices.spendCapHold(row('r1'))).toBeUndefined();
    expect(run.rowStarting(row('r1')).price).toEqual({ usd: 0.04, source: 'user' });
    expect(run.state.inFlight).toEqual({ r1: 0.04 });
  });

  it('a resume clears the pause and the stop, and hands back the rows that waited, once', () => {
    const run = batchRun();
    run.rowStarting(row('r1'));
    run.pause();
    run.rowBlocked('r1', { reason: BatchStopReason.AuthenticationRequired, httpStatus: 401, message: 'no' });
    expect(run.blockedReason()?.kind).toBe('batch_stop');
    expect(run.takeResume()).toBeUndefined();
    run.resume();
    expect(run.takeResume()).toEqual(['r1']);
    expect(run.blockedReason()).toBeUndefined();
    expect(run.takeResume()).toBeUndefined();
  });

  it("a row's end counts once, and a cancel asks each row in flight once", () => {
    const run = batchRun();
    run.rowStarting(row('r1'));
    run.rowStarting(row('r2'));
    run.cancel();
    expect(run.rowsLeftToCancel()).toBe(true);
    expect(run.takeRowsToCancel()).toEqual(['r1', 'r2']);
    expect(run.takeRowsToCancel()).toEqual([]);
    expect(run.rowsLeftToCancel()).toBe(false);
    const done = rowRecord({ batchId: 'b', rowId: 'r1', state: 'cancelled', chargedUsd: 0, netUsd: 0 });
    run.rowDone(done, undefined, () => true);
    run.rowDone(done, undefined, () => true);
    expect(run.result()).toMatchObject({ status: 'cancelled', inFlight: 1, counts: { cancelled: 1 } });
  });

  it('the deadline passes on workflow time, and the wait before it is at least 1 ms', () => {
    let nowMs = Date.parse('2026-01-01T00:00:00Z');
    const run = batchRun({ deadline: '2026-01-01T00:01:00Z' }, () => nowMs);
    expect([run.deadlinePassed(), run.untilDeadlineMs()]).toEqual([false, 60_000]);
    nowMs += 60_000;
    expect([run.deadlinePassed(), run.untilDeadlineMs()]).toEqual([true, 1]);
    expect(batchRun().untilDeadlineMs()).toBeUndefined();
  });

  it('a cap on a price given: one row in flight until a record shows the cost; a catalog price or no cap: no wait', () => {
    const run = batchRun({ spendCapUsd: 1, prices: { m: 0.01 }, concurrency: 8 });
    let asked = 0;
    run.askPriceCheck = () => (asked += 1) > 0;
    run.state.pending = [row('r1'), row('r2'), row('r3')];
    expect(run.windowFull()).toBe(false);
    run.rowStarting(run.state.pending.shift()!);
    expect(run.windowFull()).toBe(true);
    expect(run.priceHold()).toEqual({ kind: 'price_unconfirmed', model: 'm', givenUsd: 0.01 });
    expect(asked).toBeGreaterThan(0);
    // A record whose cost came from the user's price confirms nothing.
    const unshown = rowRecord({ batchId: 'b', rowId: 'r1', state: 'succeeded', model: 'm', netUsd: 0.01 });
    unshown.keys = [key('user')];
    run.rowDone(unshown, undefined, () => true);
    expect(run.state.spentUnconfirmedUsd).toBe(0.01);
    run.rowStarting(run.state.pending.shift()!);
    expect(run.windowFull()).toBe(true);
    // A record whose creation showed its cost confirms the model's price: the window opens.
    const shown = rowRecord({ batchId: 'b', rowId: 'r2', state: 'succeeded', model: 'm', netUsd: 0.01 });
    shown.keys = [key('creation')];
    run.rowDone(shown, undefined, () => true);
    run.rowStarting(row('r9'));
    expect(run.windowFull()).toBe(false);

    const catalog = batchRun({ spendCapUsd: 1, concurrency: 8 });
    catalog.askPriceCheck = () => true;
    catalog.state.prices.m = 0.01;
    catalog.state.pending = [row('r2')];
    catalog.rowStarting(row('r1'));
    expect(catalog.windowFull()).toBe(false);
    const noCap = batchRun({ prices: { m: 0.01 }, concurrency: 8 });
    noCap.askPriceCheck = () => true;
    noCap.state.pending = [row('r2')];
    noCap.rowStarting(row('r1'));
    expect(noCap.windowFull()).toBe(false);
  });
});
