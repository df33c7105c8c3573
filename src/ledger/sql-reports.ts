import { HOLDS_CHARGE, KeyOutcome, NO_MONEY_HELD, REFUNDED_IN_FULL, roundUsd } from '../model';
import type { Dialect, Sql } from './sql';
import { SummaryGroup, type ChargeSeen, type SummaryRow } from './store';

/** The store's reports: what was paid, summed by a group, and the requests paid before, by fingerprint. */

/** Key outcomes as a SQL list. */
const sqlList = (outcomes: Iterable<KeyOutcome>) => [...outcomes].map((o) => `'${o}'`).join(', ');
/** Key outcomes that hold nothing. */
export const NOTHING_HELD = sqlList(NO_MONEY_HELD);
/** Key outcomes of a key that holds its charge, when it has a creation (none: still in flight). */
const HOLDING = sqlList(HOLDS_CHARGE);
/** Key outcomes that say nothing of a charge when no creation is known. */
const UNSETTLED = sqlList([KeyOutcome.Submitting, KeyOutcome.Unknown]);
const REFUNDED = sqlList(REFUNDED_IN_FULL);
const REFUSED = sqlList([KeyOutcome.Rejected, KeyOutcome.Declined]);

/** Ids per statement at most (SQLite's default bound on parameters is 32,766). */
export const IN_CHUNK = 500;

/** A key's group as SQL: its batch, the UTC day of its first send, or its fingerprint. */
function groupExpression(dialect: Dialect, by: SummaryGroup): string {
  switch (by) {
    case SummaryGroup.Batch:
      return 'batch_id';
    case SummaryGroup.Fingerprint:
      return 'fingerprint';
    case SummaryGroup.Day:
      return dialect === 'sqlite'
        ? "strftime('%Y-%m-%d', first_sent_at / 1000, 'unixepoch')"
        : "to_char(to_timestamp(first_sent_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')";
  }
}

type SummaryColumn = 'grp' | 'keys' | 'paid' | 'paid_usd' | 'paid_cost_unknown' | 'open' | 'refunded' | 'refused';

export async function summarize(
  sql: Sql,
  dialect: Dialect,
  by: SummaryGroup,
  batchId: string | undefined,
): Promise<SummaryRow[]> {
  const group = groupExpression(dialect, by);
  const held = `creation_id IS NOT NULL AND (outcome IS NULL OR outcome IN (${HOLDING}))`;
  const rows = await sql.all<Record<SummaryColumn, unknown>>(
    `SELECT ${group} AS grp, COUNT(*) AS keys,
       SUM(CASE WHEN ${held} THEN 1 ELSE 0 END) AS paid,
       SUM(CASE WHEN ${held} AND cost_usd IS NOT NULL THEN cost_usd ELSE 0 END) AS paid_usd,
       SUM(CASE WHEN ${held} AND cost_usd IS NULL THEN 1 ELSE 0 END) AS paid_cost_unknown,
       SUM(CASE WHEN creation_id IS NULL AND (outcome IS NULL OR outcome IN (${UNSETTLED})) THEN 1 ELSE 0 END) AS open,
       SUM(CASE WHEN outcome IN (${REFUNDED}) THEN 1 ELSE 0 END) AS refunded,
       SUM(CASE WHEN outcome IN (${REFUSED}) THEN 1 ELSE 0 END) AS refused
     FROM ledger_keys ${batchId === undefined ? '' : 'WHERE batch_id = ?'}
     GROUP BY ${group} ORDER BY MIN(seq)`,
    batchId === undefined ? [] : [batchId],
  );
  return rows.map((r) => ({
    group: String(r.grp),
    keys: Number(r.keys),
    paid: Number(r.paid),
    paidUsd: roundUsd(Number(r.paid_usd)),
    paidCostUnknown: Number(r.paid_cost_unknown),
    open: Number(r.open),
    refunded: Number(r.refunded),
    refused: Number(r.refused),
  }));
}

/** For each fingerprint, the keys of it (any batch) that hold, or may hold, a charge. */
export async function paidCounts(sql: Sql, fingerprints: readonly string[]): Promise<Map<string, number>> {
  const unique = [...new Set(fingerprints)];
  const out = new Map<string, number>();
  for (let i = 0; i < unique.length; i += IN_CHUNK) {
    const chunk = unique.slice(i, i + IN_CHUNK);
    const rows = await sql.all<{ fingerprint: string; n: unknown }>(
      `SELECT fingerprint, COUNT(*) AS n FROM ledger_keys
       WHERE fingerprint IN (${chunk.map(() => '?').join(', ')})
         AND (outcome IS NULL OR outcome NOT IN (${NOTHING_HELD}))
       GROUP BY fingerprint`,
      chunk,
    );
    for (const r of rows) out.set(r.fingerprint, Number(r.n));
  }
  return out;
}

/** A field of a key's request, read from its state (JSON kept as text), as SQL. */
function requestField(dialect: Dialect, field: 'model' | 'num_images'): string {
  return dialect === 'sqlite' ? `json_extract(state, '$.request.${field}')` : `((state::json)->'request'->>'${field}')`;
}

/**
 * For each model, the latest key charged at a cost the service showed, per image it asked for. Read once before a
 * batch starts: a scan of the keys with a cost (the model sits in each key's JSON, not in a column of its own).
 */
export async function chargesSeen(
  sql: Sql,
  dialect: Dialect,
  models: readonly string[],
): Promise<Map<string, ChargeSeen>> {
  const unique = [...new Set(models)];
  const model = requestField(dialect, 'model');
  const out = new Map<string, ChargeSeen>();
  for (let i = 0; i < unique.length; i += IN_CHUNK) {
    const chunk = unique.slice(i, i + IN_CHUNK);
    const rows = await sql.all<{ model: string; images: unknown; cost: unknown; at: unknown; b: string; r: string }>(
      `SELECT model, images, cost, at, b, r FROM (
         SELECT ${model} AS model, ${requestField(dialect, 'num_images')} AS images, cost_usd AS cost,
           first_sent_at AS at, batch_id AS b, row_id AS r,
           ROW_NUMBER() OVER (PARTITION BY ${model} ORDER BY first_sent_at DESC, seq DESC) AS n
         FROM ledger_keys
         WHERE cost_usd IS NOT NULL AND creation_id IS NOT NULL AND ${model} IN (${chunk.map(() => '?').join(', ')})
       ) latest WHERE n = 1`,
      chunk,
    );
    for (const r of rows) {
      const images = Number(r.images ?? 1) || 1;
      out.set(r.model, {
        model: r.model,
        perImageUsd: roundUsd(Number(r.cost) / images),
        atMs: Number(r.at),
        batchId: r.b,
        rowId: r.r,
      });
    }
  }
  return out;
}
