import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerStore, NewLedgerEvent } from '../../src/ledger';
import { scheduleSpend } from '../../src/schedules/budget';
import { budgetLeft, KeyOutcome, RowState, type KeyOutcome as KeyOutcomeT } from '../../src/model';
import { tempLedger, testPrint } from '../helpers/ledger';
import { rowRecord } from '../helpers/records';

let dir: string;
let store: LedgerStore;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-budget-'));
  store = await tempLedger();
});
afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const at = (iso: string) => Date.parse(iso);

/** One key of a run, first sent at `sentAt`, with the cost the service showed (or none) and how it ended. */
async function key(
  batchId: string,
  rowId: string,
  sentAt: string,
  end: { costUsd?: number; outcome?: KeyOutcomeT; listedUsd?: number },
) {
  const request = { prompt: `prompt ${rowId}`, model: 'flux-dev' };
  const ids = { batchId, rowId, idempotencyKey: `ib.${batchId}.${rowId}.a1` };
  const events: NewLedgerEvent[] = [
    { type: 'sending', ...ids, request, ...testPrint(request) },
    { type: 'accepted', ...ids, creationId: `c-${batchId}-${rowId}`, ...(end.costUsd ? { costUsd: end.costUsd } : {}) },
    ...(end.outcome ? [{ type: 'ended' as const, ...ids, outcome: end.outcome }] : []),
  ];
  if (end.listedUsd !== undefined) {
    const keys = [
      { attempt: 1, idempotencyKey: ids.idempotencyKey, outcome: KeyOutcome.Succeeded, chargedUsd: end.listedUsd },
    ];
    events.push({ type: 'row', by: 'row', record: rowRecord({ batchId, rowId, state: RowState.Succeeded, keys }) });
  }
  await store.append(events, at(sentAt));
}

describe("a schedule's spend in the day and the month a run starts in (issue 33)", () => {
  it('sums what every run of the schedule spent, by when each key was first sent, in the time zone given', async () => {
    const scheduleDir = path.join(dir, 'sum');
    for (const run of ['run1', 'run2', 'run3']) await mkdir(path.join(scheduleDir, run), { recursive: true });
    await key('run1', 'a', '2026-10-31T23:30:00Z', { costUsd: 0.5, outcome: KeyOutcome.Succeeded }); // last month (UTC)
    await key('run2', 'a', '2026-11-26T12:00:00Z', { costUsd: 0.25, outcome: KeyOutcome.Succeeded }); // this month
    await key('run2', 'b', '2026-11-26T12:00:00Z', { costUsd: 0.25, outcome: KeyOutcome.Failed }); // refunded
    await key('run3', 'a', '2026-11-27T08:00:00Z', { costUsd: 0.04 }); // today, in flight: may hold money
    await key('run3', 'b', '2026-11-27T09:00:00Z', { outcome: KeyOutcome.Succeeded, listedUsd: 0.02 }); // list price
    // Another schedule's run, in the store but not in this folder: not counted.
    await key('other', 'a', '2026-11-27T09:00:00Z', { costUsd: 9, outcome: KeyOutcome.Succeeded });
    const now = at('2026-11-27T10:00:00Z');
    expect(await scheduleSpend(scheduleDir, store, now, 'UTC')).toEqual({
      dayUsd: 0.06,
      monthUsd: 0.31,
      unknownKeys: 0,
    });
    // In Tokyo (UTC+9) run1's key was sent on 1 November: this month.
    const tokyo = await scheduleSpend(scheduleDir, store, now, 'Asia/Tokyo');
    expect(tokyo.monthUsd).toBeCloseTo(0.81, 9);
  });

  it('counts a key that may hold money with no cost and no list price as unknown', async () => {
    const scheduleDir = path.join(dir, 'unknown');
    await mkdir(path.join(scheduleDir, 'open-run'), { recursive: true });
    await key('open-run', 'a', '2026-11-27T08:00:00Z', {});
    expect(await scheduleSpend(scheduleDir, store, at('2026-11-27T10:00:00Z'), 'UTC')).toEqual({
      dayUsd: 0,
      monthUsd: 0,
      unknownKeys: 1,
    });
  });
});

describe("what is left of a schedule's budget", () => {
  const spent = (dayUsd: number, monthUsd: number, unknownKeys = 0) => ({ dayUsd, monthUsd, unknownKeys });

  it('is the least of what is left of the day and of the month', () => {
    expect(budgetLeft({ perDayUsd: 1, perMonthUsd: 10 }, spent(0.25, 2)).leftUsd).toBe(0.75);
    expect(budgetLeft({ perDayUsd: 1, perMonthUsd: 10 }, spent(0.25, 9.5)).leftUsd).toBe(0.5);
    expect(budgetLeft({ perMonthUsd: 10 }, spent(5, 9.99)).leftUsd).toBe(0.01);
  });

  it('is nothing once a period is spent, and says which, in its time zone', () => {
    const day = budgetLeft({ perDayUsd: 1, perMonthUsd: 10, timezone: 'Europe/Paris' }, spent(1, 2));
    expect(day).toEqual({
      leftUsd: 0,
      spent: spent(1, 2),
      reason: "the schedule's budget of 1 USD a day (Europe/Paris) is spent: 1 USD",
    });
    expect(budgetLeft({ perMonthUsd: 10 }, spent(0, 10.5))).toMatchObject({ leftUsd: 0, reason: /10 USD a month/ });
  });

  it('is nothing while a key of the period may hold money of unknown cost: the budget could not be kept', () => {
    expect(budgetLeft({ perDayUsd: 100 }, spent(0, 0, 2))).toMatchObject({
      leftUsd: 0,
      reason: /2 keys .* unknown cost/,
    });
  });
});
