import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { expect } from 'vitest';
import { parseIdempotencyKey } from '../../src/model';
import { type Simulator } from '../../src/simulator';

/**
 * Checks of a batch that ran against the simulator, from the outside: every row's record in results.csv, and the
 * simulator's charge book (nothing paid twice). Shared by the local-mode and cluster tests.
 */

/** The states a row's record ends in. */
export const FINAL_STATES = ['succeeded', 'reused', 'failed', 'images_unsaved', 'unknown', 'cancelled', 'not_run'];

/**
 * Charges of batch `batchId` (idempotency keys `ib/<batch>/<row>/a<n>`) in the simulator's charge book: per key, and per
 * row the charges that were not refunded.
 */
export function chargesOf(
  sim: Simulator,
  batchId: string,
): { perKey: Map<string, number>; keptPerRow: Map<string, number> } {
  const perKey = new Map<string, number>();
  const keptPerRow = new Map<string, number>();
  const entries = sim.charges.entries();
  const refunded = new Set(entries.filter((e) => e.kind === 'refund').map((e) => e.creationId));
  for (const e of entries) {
    const key = parseIdempotencyKey(e.idempotencyKey ?? '');
    if (e.kind !== 'charge' || key?.batchId !== batchId) continue;
    perKey.set(e.idempotencyKey!, (perKey.get(e.idempotencyKey!) ?? 0) + 1);
    if (!refunded.has(e.creationId)) keptPerRow.set(key.rowId, (keptPerRow.get(key.rowId) ?? 0) + 1);
  }
  return { perKey, keptPerRow };
}

/** The batch was charged, no key twice, and no row kept two charges. */
export function expectNothingPaidTwice(sim: Simulator, batchId: string): void {
  const { perKey, keptPerRow } = chargesOf(sim, batchId);
  expect(perKey.size).toBeGreaterThan(0);
  expect([...perKey].filter(([, n]) => n > 1)).toEqual([]);
  expect([...keptPerRow].filter(([, n]) => n > 1)).toEqual([]);
}

/** `outDir/results.csv` has `rows` records, each in a final state; returns them. */
export async function expectEveryRowFinal(outDir: string, rows: number): Promise<Record<string, string>[]> {
  const results = parse<Record<string, string>>(await readFile(path.join(outDir, 'results.csv'), 'utf8'), {
    columns: true,
  });
  expect(results).toHaveLength(rows);
  for (const row of results) expect(FINAL_STATES, `row ${row.row_id}`).toContain(row.state);
  return results;
}
