import { describe, expect, it } from 'vitest';
import { cronInterval, cronZone } from '../../src/cli/schedule/cron-interval';
import { defaultCatchupWindowMs } from '../../src/cli/schedule/guards';

/** The shortest time between two runs of a cron expression: what the spending guard and the catch-up default read. */
describe('cronInterval', () => {
  it.each([
    ['0 2 * * *', 86_400_000],
    ['* * * * *', 60_000],
    ['*/15 * * * *', 900_000],
    ['0,50 * * * *', 600_000],
    ['59 23,0 * * *', 3_600_000],
    ['0 9-17 * * MON-FRI', 3_600_000],
    ['*/10 * * * * * *', 10_000],
    ['30 0 * * * * 2030', 3_600_000],
    ['@hourly', 3_600_000],
    ['@daily', 86_400_000],
    ['@every 30s', 30_000],
    ['@every 2h/15m', 7_200_000],
    ['0 * * * * # top of the hour', 3_600_000],
  ])('%j: %i ms', (cron, ms) => {
    expect(cronInterval(cron)).toEqual({ ms });
  });

  it.each([['0 2 * *'], ['61 * * * *'], ['a * * * *'], ['@fortnightly']])('%j cannot be read', (cron) => {
    expect(cronInterval(cron)).toHaveProperty('problem');
  });

  it('finds a time zone the expression names itself', () => {
    expect(cronZone('CRON_TZ=Europe/Paris 0 2 * * *')).toBe('Europe/Paris');
    expect(cronZone('TZ=UTC 0 2 * * *')).toBe('UTC');
    expect(cronZone('0 2 * * *')).toBeUndefined();
  });

  it('the default catch-up window is one interval, from 1 minute to 1 day', () => {
    expect(defaultCatchupWindowMs(10_000)).toBe(60_000);
    expect(defaultCatchupWindowMs(900_000)).toBe(900_000);
    expect(defaultCatchupWindowMs(7 * 86_400_000)).toBe(86_400_000);
  });
});
