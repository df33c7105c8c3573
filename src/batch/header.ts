import { type BatchProblem, ProblemCode, preview } from './problems';

/** The request columns of a batch file. Only these ever reach a request body. */
export const Column = {
  Id: 'id',
  Prompt: 'prompt',
  Model: 'model',
  NegativePrompt: 'negative_prompt',
  Width: 'width',
  Height: 'height',
  Seed: 'seed',
  NumImages: 'num_images',
} as const;
export type Column = (typeof Column)[keyof typeof Column];

/**
 * The record columns `imagebatch results` writes into errors.csv after the batch-file columns, so that errors.csv
 * can be run again as it is. They are read, never sent: a row whose `state` or `key_outcomes` says it may have been
 * paid is refused (results.csv and unresolved.csv carry them too, so their rows are refused the same way).
 */
export const RecordColumn = {
  State: 'state',
  /** errors.csv only: what to do with the row (`submit_again`, `revise_prompt`, `fix_row`); never checked. */
  Advice: 'advice',
  Resubmittable: 'resubmittable',
  Error: 'error',
  IdempotencyKeys: 'idempotency_keys',
  KeyOutcomes: 'key_outcomes',
  CreationIds: 'creation_ids',
  ChargedUsd: 'charged_usd',
  RefundedUsd: 'refunded_usd',
  NetUsd: 'net_usd',
  /** `false` when a key of the row may hold money whose price nobody showed: its figures are empty, never 0. */
  PriceKnown: 'price_known',
} as const;
export type RecordColumn = (typeof RecordColumn)[keyof typeof RecordColumn];

/** A column a batch file may have: one of the request, or one of errors.csv's record. */
export type KnownColumn = Column | RecordColumn;

const REQUEST_KNOWN: ReadonlySet<string> = new Set<string>(Object.values(Column));
const KNOWN: ReadonlySet<string> = new Set<string>([...Object.values(Column), ...Object.values(RecordColumn)]);

/** Where each known column sits in a record; absent columns are missing from the map. */
export type ColumnIndex = ReadonlyMap<KnownColumn, number>;

export interface ParsedHeader {
  /** The header cells as written (trimmed), kept in the page cursor so later pages need not re-read line 1. */
  columns: string[];
  index: ColumnIndex;
  problems: BatchProblem[];
}

/**
 * Reads the header row. Unknown columns are errors, not warnings: the service rejects unknown body fields,
 * and a misspelt optional column (`Width`, `neg_prompt`) silently dropped would spend money on images made
 * without the settings the user asked for. The fix is one edit of line 1, so refusing is cheap.
 */
export function parseHeader(cells: readonly string[], line: number): ParsedHeader {
  const columns = cells.map((c) => c.trim());
  const index = new Map<KnownColumn, number>();
  const problems: BatchProblem[] = [];
  const seen = new Map<string, number>();
  columns.forEach((name, i) => {
    const position = `column ${i + 1}`;
    if (name === '') {
      problems.push({
        code: ProblemCode.HeaderEmptyColumn,
        line,
        message: `header ${position} has no name (a trailing comma?)`,
      });
      return;
    }
    const earlier = seen.get(name);
    if (earlier !== undefined) {
      problems.push({
        code: ProblemCode.HeaderDuplicateColumn,
        line,
        field: name,
        message: `header column ${preview(name)} appears twice (columns ${earlier + 1} and ${i + 1})`,
      });
      return;
    }
    seen.set(name, i);
    if (KNOWN.has(name)) {
      index.set(name as KnownColumn, i);
      return;
    }
    problems.push({ code: ProblemCode.HeaderUnknownColumn, line, field: name, message: unknownColumnMessage(name) });
  });
  if (!index.has(Column.Prompt)) {
    problems.push({
      code: ProblemCode.HeaderMissingPrompt,
      line,
      field: Column.Prompt,
      message: `the header has no "prompt" column (found: ${columns.map((c) => preview(c)).join(', ') || 'nothing'})`,
    });
  }
  return { columns, index, problems };
}

function unknownColumnMessage(name: string): string {
  const known = [...REQUEST_KNOWN].join(', ');
  const record = Object.values(RecordColumn).join(', ');
  if (name.includes('\u0000')) {
    return `header column ${preview(name)} contains NUL characters: the file looks like UTF-16; save it as UTF-8`;
  }
  const normalized = name.toLowerCase().replace(/[\s-]+/g, '_');
  const hint = KNOWN.has(normalized) ? ` (did you mean "${normalized}"?)` : '';
  return (
    `unknown column ${preview(name)}${hint}: the service rejects unknown fields; allowed columns are ${known} ` +
    `(and errors.csv's ${record}, which are never sent)`
  );
}

/** Rebuilds the column index from a cursor's stored header (already validated on the first page). */
export function indexColumns(columns: readonly string[]): ColumnIndex {
  const index = new Map<KnownColumn, number>();
  columns.forEach((name, i) => {
    if (KNOWN.has(name) && !index.has(name as KnownColumn)) index.set(name as KnownColumn, i);
  });
  return index;
}
