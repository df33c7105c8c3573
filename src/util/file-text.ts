import { stringify } from 'csv-stringify/sync';

/* eslint-disable no-control-regex -- matching control characters is the point of this file */

/**
 * The text of the files imagebatch writes for people (results, errors, unresolved, rejected, ledger export), safe
 * to open: a spreadsheet runs no formula of it, and a terminal that shows it (`cat`, `less -r`) runs no escape.
 */

/** One rule for every file: C0 controls but tab and line feed, DEL, C1 and bidi overrides become `\uXXXX` text. */
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves raw of the above (it escapes C0 itself): DEL, C1 and bidi overrides. */
const UNSAFE_IN_JSON = /[\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;
/** A plain number (money we format ourselves, maybe negative): never a formula. */
const NUMBER = /^-?\d+(\.\d+)?$/;

const escaped = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** A CSV cell with its unsafe characters escaped, and a leading apostrophe when a spreadsheet would run it. */
export function csvCell(value: string): string {
  const text = value.replace(UNSAFE, escaped);
  return /^[=+\-@\t]/.test(text) && !NUMBER.test(text) ? `'${text}` : text;
}

/**
 * Rows as CSV, every cell through {@link csvCell} but the first `sentAgain` of each row: a batch file's own cells
 * (errors.csv's), which run again exactly as the user wrote them.
 */
export function csvText(rows: readonly (readonly string[])[], sentAgain = 0): string {
  return stringify(rows.map((row) => row.map((cell, i) => (i < sentAgain ? cell : csvCell(cell)))));
}

/** One JSON line with no raw DEL, C1 or bidi override: each is a `\uXXXX` escape, so the value reads back whole. */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(UNSAFE_IN_JSON, escaped);
}
