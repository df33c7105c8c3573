import { describe, expect, it } from 'vitest';
import { BatchStopReason, type BatchRowInput } from '../../src/model';
import type { BatchWorkflowInput } from '../../src/workflows/batch-input';
import { BatchRun } from '../../src/workflows/batch-run';
import { rowRecord } from '../helpers/records';

/** What a batch's run decides between its commands, without Temporal: the workflow only wires these methods. */
function batchRun(given: Partial<BatchWorkflowInput> = {}, now = () => 0): BatchRun {
  return new BatchRun({ batchId: 'b', file: 'f.csv', outDir: 'out', ...given }, now, true);
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
});
