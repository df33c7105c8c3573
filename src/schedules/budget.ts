import type { BudgetSpent } from '../model';
import { runBatchIds } from './runs';
import { eachRow, keyMayHoldMoney, ledgerKeyOf, type LedgerStore } from '../ledger';

/**
 * What the runs of the schedule in `scheduleDir` spent in the day and the month of `nowMs`, read in `timezone`, from
 * the ledger store: each key that may hold money, at what the service said it cost, else at the list price its row's
 * record kept, in the period it was first sent in. A refunded or refused key spent nothing.
 */
export async function scheduleSpend(
  scheduleDir: string,
  store: LedgerStore,
  nowMs: number,
  timezone: string,
): Promise<BudgetSpent> {
  const dayOf = dayFormat(timezone);
  const today = dayOf(nowMs);
  const month = today.slice(0, 7);
  const spent: BudgetSpent = { dayUsd: 0, monthUsd: 0, unknownKeys: 0 };
  for (const batchId of await runBatchIds(scheduleDir)) {
    for await (const row of eachRow(store, batchId)) {
      const listed = new Map(row.record?.keys.map((k) => [ledgerKeyOf(k), k.chargedUsd]));
      for (const key of row.keys) {
        if (!keyMayHoldMoney(key)) continue;
        const day = dayOf(key.firstSentAtMs);
        if (day.slice(0, 7) !== month) continue;
        const cost = key.costUsd ?? listed.get(key.idempotencyKey);
        if (cost === undefined) {
          spent.unknownKeys += 1;
          continue;
        }
        spent.monthUsd += cost;
        if (day === today) spent.dayUsd += cost;
      }
    }
  }
  return spent;
}

/** `YYYY-MM-DD` of an instant in an IANA time zone. */
function dayFormat(timezone: string): (ms: number) => string {
  const format = new Intl.DateTimeFormat('en-CA', {
    timeZone: timezone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  });
  return (ms) => format.format(new Date(ms));
}
