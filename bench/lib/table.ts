/**
 * Tables as GitHub markdown: printed as they are (paste-ready for BENCHMARKS.md) and collected for `--out`.
 */

export type Cell = string | number;

/** One benchmark's result: a titled table plus the notes that explain it. */
export interface Table {
  title: string;
  headers: string[];
  rows: Cell[][];
  /** Lines printed under the table (settings, goals met or missed, caveats). */
  notes: string[];
}

/** Formats a number for a table: thousands separators, `digits` decimals. */
export function num(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A goal's verdict for the notes. */
export function verdict(met: boolean): string {
  return met ? 'met' : '**missed**';
}

export function toMarkdown(table: Table): string {
  const widths = table.headers.map((h, i) =>
    Math.max(3, h.length, ...table.rows.map((r) => String(r[i] ?? '').length)),
  );
  const line = (cells: Cell[]) =>
    `| ${cells.map((c, i) => (typeof c === 'number' ? String(c).padStart(widths[i] ?? 0) : String(c).padEnd(widths[i] ?? 0))).join(' | ')} |`;
  return [
    `### ${table.title}`,
    '',
    line(table.headers),
    `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`,
    ...table.rows.map(line),
    '',
    ...table.notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
}
