import { describe, expect, it } from 'vitest';
import { asksLines } from '../../src/cli/schedule/manage';

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
