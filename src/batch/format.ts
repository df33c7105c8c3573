import path from 'node:path';
import type { BatchFormat } from '../model';
import { type JsonLinesInput, scanJsonLines } from './jsonl-scan';
import { type ScanResult, scanRecords } from './scan';

/** Delimiters a CSV file may use, in the order that wins a tie: comma, tab, semicolon. */
const DELIMITERS: readonly { format: BatchFormat; char: string }[] = [
  { format: 'comma', char: ',' },
  { format: 'tab', char: '\t' },
  { format: 'semicolon', char: ';' },
];

/** Records the sniffer looks at: the header and a few rows after it. */
const SNIFF_RECORDS = 6;

/** The delimiter of a CSV format (undefined for JSON Lines). */
export function delimiterOf(format: BatchFormat): string | undefined {
  return DELIMITERS.find((d) => d.format === format)?.char;
}

/** How a format is named in messages and reports. */
export function formatName(format: BatchFormat): string {
  switch (format) {
    case 'comma':
      return 'CSV (comma-separated)';
    case 'tab':
      return 'tab-separated (TSV)';
    case 'semicolon':
      return 'CSV (semicolon-separated)';
    case 'jsonl':
      return 'JSON Lines';
  }
}

/**
 * How a batch file is written, from its name and its first bytes (`head`, after any byte-order mark):
 *
 * - `.jsonl` and `.ndjson` are JSON Lines, and so is any file whose first byte that is not blank is `{`;
 * - `.tsv` and `.tab` are tab-separated;
 * - any other file is CSV, its delimiter sniffed by {@link sniffDelimiter}.
 */
export function detectFormat(file: string, head: Buffer): BatchFormat {
  const ext = path.extname(file).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  if (ext === '.tsv' || ext === '.tab') return 'tab';
  const text = head.toString('utf8');
  if (/^\s*\{/.test(text)) return 'jsonl';
  return sniffDelimiter(text);
}

/**
 * The delimiter of a CSV text: for comma, tab and semicolon, the cells of each of the first records (quotes
 * respected; the last record is left out when `text` may stop inside it). A delimiter is consistent when the
 * header has more than one cell and every record after it as many. The consistent one with most columns wins,
 * comma before tab before semicolon on a tie. When none is consistent, the one that splits the header into most
 * cells wins (the rows are then reported as ragged). A header of one cell is comma CSV.
 */
export function sniffDelimiter(text: string): BatchFormat {
  let best: { format: BatchFormat; width: number; consistent: boolean } | undefined;
  for (const { format, char } of DELIMITERS) {
    const widths = recordWidths(text, char);
    const width = widths[0] ?? 1;
    if (width < 2) continue;
    const consistent = widths.every((w) => w === width);
    const better =
      best === undefined || (consistent && !best.consistent) || (consistent === best.consistent && width > best.width);
    if (better) best = { format, width, consistent };
  }
  return best?.format ?? 'comma';
}

/** Cells per record of the first {@link SNIFF_RECORDS} non-blank records, quotes respected. */
function recordWidths(text: string, delimiter: string): number[] {
  const widths: number[] = [];
  let cells = 1;
  let quoted = false;
  let fieldStart = true;
  let content = false;
  for (let i = 0; i < text.length && widths.length < SNIFF_RECORDS; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') i += 1;
        else quoted = false;
      }
      continue;
    }
    if (ch === '"' && fieldStart) {
      quoted = true;
      fieldStart = false;
      content = true;
    } else if (ch === delimiter) {
      cells += 1;
      fieldStart = true;
      content = true;
    } else if (ch === '\n' || ch === '\r') {
      if (content) widths.push(cells);
      cells = 1;
      fieldStart = true;
      content = false;
    } else {
      fieldStart = false;
      if (ch !== ' ') content = true;
    }
  }
  // A record the text ends in is complete only when it fits whole (the sniffer may see a cut record).
  if (content && !quoted && widths.length === 0) widths.push(cells);
  return widths;
}

/** Scans a batch file written in `format`: JSON Lines, or CSV with its delimiter. */
export function scanBatchFile(input: JsonLinesInput & { format: BatchFormat }): Promise<ScanResult> {
  const { format, ...rest } = input;
  if (format === 'jsonl') return scanJsonLines(rest);
  return scanRecords({ ...rest, delimiter: delimiterOf(format) ?? ',' });
}
