import { readFile } from 'node:fs/promises';
import { idempotencyKeyFor, parseIdempotencyKey } from '../../src/model';

/**
 * The spend reconciliation of a batch: what its results say it spent (results.jsonl, one record per row) against what
 * the simulator's charge book charged and refunded under the batch's idempotency keys, per row and in total. Pure: it
 * takes plain data (records as results.jsonl holds them, creations as `Ledger.byCreation()` gives them), so that it
 * can be tested without a server.
 *
 * A money figure in results is a number or null (unknown: no price shown, or the outcome not known). A row with a
 * null figure is a row of unknown spend: not a difference by itself, and out of the known totals. Every other row
 * of the results or of the ledger is compared: charged, refunded and net, each within {@link TOLERANCE_USD}.
 */

/** Figures are rounded to 6 decimals: a difference of more than this (1 micro-dollar) is a difference. */
export const TOLERANCE_USD = 1e-6;

/**
 * What the reconciliation reads of a results.jsonl record. The money fields are read as `unknown` and narrowed:
 * a number is known, null is unknown, anything else is a malformed figure (a difference).
 */
export interface ResultsSpendRecord {
  row_id: string;
  keys: readonly { idempotency_key: string; outcome?: unknown }[];
  charged_usd: unknown;
  refunded_usd: unknown;
  net_usd: unknown;
}

/** What the reconciliation reads of a simulator creation (`ChargeBook.byCreation()`). */
export interface SimulatorCreationSpend {
  creationId: string;
  idempotencyKey: string | null;
  chargedUsd: number;
  refundedUsd: number;
}

export interface Spend {
  chargedUsd: number;
  refundedUsd: number;
  netUsd: number;
}

/** A row's figures as results show them: null where unknown. */
export interface ResultsSpend {
  chargedUsd: number | null;
  refundedUsd: number | null;
  netUsd: number | null;
}

/** A row whose results differ from the simulator's charge book, and why. */
export interface SpendDifference {
  rowId: string;
  /** What results show for the row; null when results have no record of it. */
  results: ResultsSpend | null;
  /** What the simulator's charge book holds over every key of the row. */
  simulator: Spend;
  /** In words: which figures differ, keys results do not list, a malformed figure, a repeated or missing record. */
  reasons: string[];
}

/** A row whose results hold a null figure, with what the simulator's charge book holds for it. */
export interface UnknownSpendRow {
  rowId: string;
  results: ResultsSpend;
  simulator: Spend;
}

export interface SpendReconciliation {
  /** Rows of results.jsonl (distinct row ids). */
  resultRows: number;
  /** Rows compared figure by figure: every row of the results or of the ledger but the rows of unknown spend. */
  rowsCompared: number;
  /** Rows that differ, in row order of the results, then rows only the ledger knows. */
  differences: SpendDifference[];
  /** Rows of unknown spend (a null figure in results), and the ledger's figures for them. */
  unknownRows: UnknownSpendRow[];
  unknownSimulator: Spend;
  /** Results' totals over the rows of known spend. */
  resultsKnown: Spend;
  /** The ledger's totals over the same rows. */
  simulatorSameRows: Spend;
  /** The ledger's totals over every key of the batch (rows of unknown spend and rows results lack included). */
  simulatorAllRows: Spend;
  /** The totals (charged, refunded, net) in which the known rows' results differ from the ledger's same rows. */
  totalsDiffering: (keyof Spend)[];
  /**
   * Charges the simulator made and refunded in full under a key of the results whose answer the client never saw (a
   * 502 or 503 lost on the way; the same key was then sent again): they hold nothing and no client can know them, so
   * the comparison of charged and refunded leaves them out (net is compared as it is). Counted, never hidden.
   */
  unseenRefunded: { charges: number; usd: number };
}

const FIGURES = [
  ['chargedUsd', 'charged_usd', 'charged'],
  ['refundedUsd', 'refunded_usd', 'refunded'],
  ['netUsd', 'net_usd', 'net'],
] as const;

/** Money in whole micro-dollars, so that totals add up exactly. */
const micros = (usd: number): number => Math.round(usd * 1_000_000);
const usdOf = (m: number): number => m / 1_000_000;

interface Sum {
  charged: number;
  refunded: number;
}
const emptySum = (): Sum => ({ charged: 0, refunded: 0 });
const add = (into: Sum, s: Sum): void => {
  into.charged += s.charged;
  into.refunded += s.refunded;
};
const spendOf = (s: Sum): Spend => ({
  chargedUsd: usdOf(s.charged),
  refundedUsd: usdOf(s.refunded),
  netUsd: usdOf(s.charged - s.refunded),
});

/** Reads a figure as results hold it: a finite number, null (unknown), or neither (malformed). */
function figure(value: unknown): { known: number } | { unknown: true } | { malformed: string } {
  if (value === null) return { unknown: true };
  if (typeof value === 'number' && Number.isFinite(value)) return { known: value };
  return { malformed: value === undefined ? 'missing' : JSON.stringify(value) };
}

const differs = (a: number, b: number): boolean => Math.abs(a - b) > TOLERANCE_USD + 1e-9;

/**
 * Results against the ledger. A row's keys, on the ledger's side, are every key the simulator saw that is the key of
 * that row of this batch ({@link idempotencyKeyFor}), and every key results list for it; a key the simulator charged
 * that results do not list is a difference, whatever the totals say.
 */
export function reconcileSpend(
  batchId: string,
  records: readonly ResultsSpendRecord[],
  creations: readonly SimulatorCreationSpend[],
): SpendReconciliation {
  // The ledger per key, and the batch's keys per row.
  const byKey = new Map<string, Sum>();
  /** Per key, the charges refunded in full, each in micro-dollars. */
  const refundedInFull = new Map<string, number[]>();
  for (const c of creations) {
    if (c.idempotencyKey === null) continue;
    const s = byKey.get(c.idempotencyKey) ?? emptySum();
    add(s, { charged: micros(c.chargedUsd), refunded: micros(c.refundedUsd) });
    byKey.set(c.idempotencyKey, s);
    if (c.chargedUsd > 0 && micros(c.chargedUsd) === micros(c.refundedUsd)) {
      refundedInFull.set(c.idempotencyKey, [...(refundedInFull.get(c.idempotencyKey) ?? []), micros(c.chargedUsd)]);
    }
  }
  let unseenCharges = 0;
  let unseenMicros = 0;
  const keysOfRow = new Map<string, string[]>();
  const simulatorAll = emptySum();
  for (const [key, s] of byKey) {
    const parsed = parseIdempotencyKey(key);
    if (!parsed || idempotencyKeyFor(batchId, parsed.rowId, parsed.attempt) !== key) continue;
    keysOfRow.set(parsed.rowId, [...(keysOfRow.get(parsed.rowId) ?? []), key]);
    add(simulatorAll, s);
  }

  const recordsOf = new Map<string, ResultsSpendRecord[]>();
  for (const r of records) recordsOf.set(r.row_id, [...(recordsOf.get(r.row_id) ?? []), r]);

  const differences: SpendDifference[] = [];
  const unknownRows: UnknownSpendRow[] = [];
  const unknownSim = emptySum();
  const resultsKnown = emptySum();
  let resultsKnownNet = 0; // results' net is its own figure, not charged less refunded: totalled as it is
  const simulatorSame = emptySum();
  let rowsCompared = 0;

  for (const [rowId, found] of recordsOf) {
    const record = found[0]!;
    const listed = new Set(record.keys.map((k) => k.idempotency_key));
    const keys = [...new Set([...listed, ...(keysOfRow.get(rowId) ?? [])])];
    const sim = emptySum();
    for (const k of keys) add(sim, byKey.get(k) ?? emptySum());
    // Refunded-in-full charges of a listed key beyond the one its outcome in results accounts for (a key that ended
    // `failed` or `refunded` saw its refund): never seen answered. A key without an outcome is left as it is.
    for (const k of record.keys) {
      if (typeof k.outcome !== 'string') continue;
      let seen = k.outcome === 'failed' || k.outcome === 'refunded' ? 1 : 0;
      for (const charge of refundedInFull.get(k.idempotency_key) ?? []) {
        if (seen > 0) {
          seen -= 1;
          continue;
        }
        sim.charged -= charge;
        sim.refunded -= charge;
        unseenCharges += 1;
        unseenMicros += charge;
      }
    }
    const simulator = spendOf(sim);

    const reasons: string[] = [];
    if (found.length > 1) reasons.push(`${found.length} records in results`);
    const unlisted = keys.filter((k) => !listed.has(k) && (byKey.get(k)?.charged ?? 0) > 0);
    for (const k of unlisted) {
      reasons.push(`key ${k} charged ${usdOf(byKey.get(k)!.charged)} by the simulator, not in results`);
    }

    const read = FIGURES.map(([, field, name]) => ({ name, field, value: figure(record[field]) }));
    const malformed = read.flatMap((f) => ('malformed' in f.value ? [`${f.field} is ${f.value.malformed}`] : []));
    const knownOf = (i: number): number | null => {
      const f = read[i]!.value;
      return 'known' in f ? f.known : null;
    };
    const results: ResultsSpend = { chargedUsd: knownOf(0), refundedUsd: knownOf(1), netUsd: knownOf(2) };
    reasons.push(...malformed);

    if (malformed.length === 0 && read.some((f) => 'unknown' in f.value)) {
      // Unknown spend: not a difference by itself (a repeated record or an unlisted charged key still is).
      unknownRows.push({ rowId, results, simulator });
      add(unknownSim, sim);
      if (reasons.length > 0) differences.push({ rowId, results, simulator, reasons });
      continue;
    }
    rowsCompared++;
    if (malformed.length === 0) {
      for (const [spendField, , name] of FIGURES) {
        if (differs(results[spendField]!, simulator[spendField])) {
          reasons.push(`${name}: results ${results[spendField]}, simulator ${simulator[spendField]}`);
        }
      }
      add(resultsKnown, { charged: micros(results.chargedUsd!), refunded: micros(results.refundedUsd!) });
      resultsKnownNet += micros(results.netUsd!);
      add(simulatorSame, sim);
    }
    if (reasons.length > 0) differences.push({ rowId, results, simulator, reasons });
  }

  // Rows the ledger charged under this batch's keys that results have no record of.
  for (const [rowId, keys] of keysOfRow) {
    if (recordsOf.has(rowId)) continue;
    const sim = emptySum();
    for (const k of keys) add(sim, byKey.get(k)!);
    rowsCompared++;
    differences.push({
      rowId,
      results: null,
      simulator: spendOf(sim),
      reasons: [`no record in results; the simulator saw ${keys.join(', ')}`],
    });
  }

  const known = { ...spendOf(resultsKnown), netUsd: usdOf(resultsKnownNet) };
  const same = spendOf(simulatorSame);
  const totalsDiffering = FIGURES.filter(([field]) => differs(known[field], same[field])).map(([field]) => field);
  return {
    resultRows: recordsOf.size,
    rowsCompared,
    differences,
    unknownRows,
    unknownSimulator: spendOf(unknownSim),
    resultsKnown: known,
    simulatorSameRows: same,
    simulatorAllRows: spendOf(simulatorAll),
    totalsDiffering,
    unseenRefunded: { charges: unseenCharges, usd: usdOf(unseenMicros) },
  };
}

/** USD with 2 to 6 decimals: `$7.96`, `$0.123456`. */
export function usd(value: number): string {
  const text = value.toFixed(6).replace(/0{1,4}$/, '');
  return value < 0 ? `-$${text.slice(1)}` : `$${text}`;
}

/** The total in words: "results: at least $X plus N rows of unknown spend; simulator: $Y". */
export function spendTotalInWords(r: SpendReconciliation): string {
  const unknown = r.unknownRows.length;
  const results =
    unknown === 0
      ? usd(r.resultsKnown.netUsd)
      : `at least ${usd(r.resultsKnown.netUsd)} plus ${unknown} row${unknown === 1 ? '' : 's'} of unknown spend`;
  return `results: ${results}; simulator: ${usd(r.simulatorAllRows.netUsd)}`;
}

/** A row's difference in one line: both figures, then why. */
export function describeDifference(d: SpendDifference): string {
  const sim = `simulator ${usd(d.simulator.chargedUsd)} / ${usd(d.simulator.refundedUsd)} / ${usd(d.simulator.netUsd)}`;
  if (d.results === null) return `${d.rowId}: results none, ${sim} (${d.reasons.join('; ')})`;
  const fig = (v: number | null) => (v === null ? 'unknown' : usd(v));
  const res = `results ${fig(d.results.chargedUsd)} / ${fig(d.results.refundedUsd)} / ${fig(d.results.netUsd)}`;
  return `${d.rowId}: ${res}, ${sim} charged / refunded / net (${d.reasons.join('; ')})`;
}

/** How many differing rows a violation or the table names. */
export const DIFFERENCES_NAMED = 5;

/** Every difference, as violations of the chaos run: a row that differs, totals that differ. */
export function spendViolations(r: SpendReconciliation): string[] {
  const out: string[] = [];
  if (r.differences.length > 0) {
    const named = r.differences.slice(0, DIFFERENCES_NAMED).map(describeDifference);
    const more = r.differences.length - named.length;
    out.push(
      `spend reconciliation: ${r.differences.length} rows differ from the simulator's charge book ` +
        `(${named.join(' | ')}${more > 0 ? ` | and ${more} more` : ''})`,
    );
  }
  if (r.totalsDiffering.length > 0) {
    const totals = r.totalsDiffering
      .map((f) => `${f.replace('Usd', '')} ${usd(r.resultsKnown[f])} vs ${usd(r.simulatorSameRows[f])}`)
      .join(', ');
    out.push(
      `spend reconciliation: the known rows' totals differ from the simulator's over the same rows (${totals}); ` +
        spendTotalInWords(r),
    );
  }
  return out;
}

/**
 * The records of a results.jsonl file, as the reconciliation reads them: each line's `row_id` and keys are checked,
 * its money figures are left `unknown` for {@link reconcileSpend} to narrow.
 */
export async function readResultsSpend(file: string): Promise<ResultsSpendRecord[]> {
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .map((line, i) => [line, i + 1] as const)
    .filter(([line]) => line.trim() !== '')
    .map(([line, n]) => spendRecordOf(JSON.parse(line) as unknown, `${file}:${n}`));
}

function spendRecordOf(value: unknown, where: string): ResultsSpendRecord {
  if (typeof value !== 'object' || value === null) throw new Error(`${where}: not a JSON object`);
  const o = value as Record<string, unknown>;
  if (typeof o.row_id !== 'string') throw new Error(`${where}: row_id is not a string`);
  if (!Array.isArray(o.keys)) throw new Error(`${where}: keys is not a list`);
  const keys = (o.keys as unknown[]).map((k, i) => {
    const key = typeof k === 'object' && k !== null ? (k as Record<string, unknown>).idempotency_key : undefined;
    if (typeof key !== 'string') throw new Error(`${where}: keys[${i}].idempotency_key is not a string`);
    return { idempotency_key: key, outcome: (k as Record<string, unknown>).outcome };
  });
  return { row_id: o.row_id, keys, charged_usd: o.charged_usd, refunded_usd: o.refunded_usd, net_usd: o.net_usd };
}
