import type { ScheduleBudget } from '../../model';
import { OptionError } from '../errors';
import { USD_PATTERN } from '../options';

/** `--budget <usd>/<day|month>`, given once or twice: what all of a schedule's runs may spend in a day or a month. */
export const BUDGET_FLAG = '--budget';

/** The periods a budget is kept over, in the schedule's time zone. */
export const BUDGET_PERIODS = ['day', 'month'] as const;

/** One `--budget` value (`20/day`, `300/month`) added to those before it; a period given twice is refused. */
export function parseBudgetOption(
  value: string,
  previous: Omit<ScheduleBudget, 'timezone'> = {},
): Omit<ScheduleBudget, 'timezone'> {
  const [usd = '', period = '', ...rest] = value.split('/').map((part) => part.trim());
  if (rest.length > 0 || !USD_PATTERN.test(usd) || !BUDGET_PERIODS.some((p) => p === period)) {
    throw new OptionError(BUDGET_FLAG, `expected <usd>/day or <usd>/month, e.g. 20/day (got ${JSON.stringify(value)})`);
  }
  const key = period === 'day' ? 'perDayUsd' : 'perMonthUsd';
  if (previous[key] !== undefined) {
    throw new OptionError(BUDGET_FLAG, `a budget a ${period} is given twice (got ${JSON.stringify(value)})`);
  }
  return { ...previous, [key]: Number(usd) };
}
