import { describe, expect, it } from 'vitest';
import { asksLines } from '../../src/cli/schedule/manage';
import { scheduleRunsLines } from '../../src/cli/schedule-runs';

/** What `schedule describe` says each run asks for and may spend (issue 33: the default said, the budget named). */
describe('schedule describe: what each run asks for and may spend', () => {
  it('the default: every row as new images, no cap, no budget', () => {
    expect(asksLines({ eachRun: 'all' })).toEqual([
      'each run: every row, as new images',
      'spend cap of a run: none; budget: none',
    ]);
  });

  it('new and changed requests only, a cap, and a budget a day and a month in its time zone', () => {
    const lines = asksLines({
      eachRun: 'new',
      spendCapUsd: 2,
      budget: { perDayUsd: 5, perMonthUsd: 100, timezone: 'Europe/Paris' },
    });
    expect(lines).toEqual([
      'each run: only the requests no earlier run may have paid for (new and changed rows, by what they ask)',
      'spend cap of a run: 2 USD; budget: 5 USD a day, 100 USD a month for all runs (Europe/Paris)',
    ]);
  });
});

describe("schedule describe: a run's line says what is not known as unknown", () => {
  const base = { indexNote: undefined, index: '/out/runs.jsonl', skipped: { overlap: 0, missedCatchupWindow: 0 } };
  const run = { runId: 'r1', rows: 4, succeeded: 1, failed: 0, notRun: 3, startedAt: 't0', endedAt: 't1' };

  it('a terminated run: what it left out and what it spent, unknown', () => {
    const lines = scheduleRunsLines({ ...base, runs: [{ ...run, outcome: 'terminated' }] });
    expect(lines).toContain(
      '  r1 terminated at t1: 1 succeeded, 0 failed, 3 not run, unknown skipped as paid before, spend unknown',
    );
  });

  it('rows of unknown spend on top of what is known', () => {
    const lines = scheduleRunsLines({
      ...base,
      runs: [{ ...run, outcome: 'completed', skipped: 2, spentUsd: 0.08, unknownSpendRows: 1 }],
    });
    expect(lines).toContain(
      '  r1 completed at t1: 1 succeeded, 0 failed, 3 not run, 2 skipped as paid before, 0.08 USD and 1 row(s) of unknown spend',
    );
  });
});
