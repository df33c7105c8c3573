import { ErrorCode, ImagebatchError } from '../model/errors';

/**
 * Problems found in a batch file. Every problem names a physical line (1-based, the header is line 1) and,
 * when it concerns one cell, the column; codes are stable strings so the CLI, tests and result files can
 * match on them without parsing messages.
 */

export const ProblemCode = {
  /** The file has no header row at all (empty, or only blank lines). */
  FileEmpty: 'file.empty',
  /** The header is fine but no data row follows it. */
  FileNoRows: 'file.no_rows',
  /** A UTF-16 or UTF-32 byte-order mark: only UTF-8 is read. */
  UnsupportedEncoding: 'file.unsupported_encoding',
  /** The file is not text: a zip archive (an Excel workbook), NUL bytes, or mostly bytes that are not text. */
  NotText: 'file.not_text',
  /** Bytes that are not UTF-8 on this line; never silently replaced. */
  InvalidUtf8: 'encoding.invalid_utf8',
  HeaderMissingPrompt: 'header.missing_prompt',
  HeaderUnknownColumn: 'header.unknown_column',
  HeaderDuplicateColumn: 'header.duplicate_column',
  HeaderEmptyColumn: 'header.empty_column',
  /** `--carry` or `--column` names a column the header does not have. */
  HeaderOptionColumnMissing: 'header.option_column_missing',
  /** More columns of the user's (carried or sent) than `MAX_USER_COLUMNS`. */
  HeaderTooManyColumns: 'header.too_many_columns',
  /** JSON Lines: a line that is not one JSON object. */
  JsonInvalid: 'json.invalid',
  /** JSON Lines: a key that is not one of the columns (the keys of the first object). */
  JsonUnknownKey: 'json.unknown_key',
  /** JSON Lines: a value that is an object or an array (a cell holds a string, a number or a boolean). */
  JsonNestedValue: 'json.nested_value',
  /** A quoted field that is never closed; the rest of the file was read as that field. */
  UnclosedQuote: 'csv.unclosed_quote',
  /** A quote where CSV does not allow one (inside an unquoted field, or text after a closing quote). */
  InvalidQuote: 'csv.invalid_quote',
  /** A record with more or fewer fields than the header. */
  RaggedRow: 'csv.ragged_row',
  /** A record larger than `maxRecordBytes`. Fatal: the scan stops here. */
  RecordTooLarge: 'csv.record_too_large',
  /** A record with more fields than `maxFields`. Fatal: the scan stops here. */
  TooManyFields: 'csv.too_many_fields',
  /** Any other CSV syntax error reported by the parser. */
  Malformed: 'csv.malformed',
  /** A cell breaks the submit-body rules (contract-defaults.md, "The submit body"). */
  FieldInvalid: 'row.field_invalid',
  /** Neither a `model` cell nor a batch default model. */
  ModelMissing: 'row.model_missing',
  /** The `id` cell is not 1..128 characters of [A-Za-z0-9._:-]. */
  IdInvalid: 'row.id_invalid',
  /** The row id was already used by an earlier row. */
  DuplicateId: 'row.duplicate_id',
} as const;
export type ProblemCode = (typeof ProblemCode)[keyof typeof ProblemCode];

export interface BatchProblem {
  code: ProblemCode;
  /** Physical line in the file, 1-based; the header is line 1. For a row, the line where the row starts. */
  line: number;
  /** The column concerned, when the problem is about one cell. */
  field?: string;
  /** The row's id, when the problem is about a data row whose id is known. */
  rowId?: string;
  /** For `row.duplicate_id`: the line of the row that used the id first. */
  firstLine?: number;
  message: string;
}

/**
 * Keeps the first `limit` problems and only counts the rest, so that a hostile or badly broken file cannot
 * grow memory without bound while the report still says how many problems there were.
 */
/** Problems that end the read of a file early (the report is then incomplete). */
const STOPPING_CODES: ReadonlySet<string> = new Set([
  ProblemCode.RecordTooLarge,
  ProblemCode.TooManyFields,
  ProblemCode.UnsupportedEncoding,
  ProblemCode.NotText,
]);

export class ProblemCollector {
  private readonly kept: BatchProblem[] = [];
  private total = 0;
  private lastKey = '';

  constructor(private readonly limit: number) {}

  add(problem: BatchProblem): void {
    // csv-parse can report the same quote error several times for one record: keep one.
    const key = `${problem.code}\u0000${problem.line}\u0000${problem.field ?? ''}\u0000${problem.message}`;
    if (key === this.lastKey) return;
    this.lastKey = key;
    this.total += 1;
    // A problem that stops the read is always kept, past the limit too: it says why the report is incomplete.
    if (this.kept.length < this.limit || STOPPING_CODES.has(problem.code)) this.kept.push(problem);
  }

  get count(): number {
    return this.total;
  }

  get dropped(): number {
    return this.total - this.kept.length;
  }

  /** The kept problems, by line (stable: problems of one line keep the order they were found in). */
  sorted(): BatchProblem[] {
    return this.kept
      .map((p, i) => ({ p, i }))
      .sort((a, b) => a.p.line - b.p.line || a.i - b.i)
      .map(({ p }) => p);
  }
}

/** Shortens a user value for a message, so a 4,000-character prompt does not flood the report. */
export function preview(value: string, max = 40): string {
  const chars = Array.from(value);
  return JSON.stringify(chars.length <= max ? value : `${chars.slice(0, max).join('')}…`);
}

/** Why a {@link BatchFileError} was thrown. */
export const BatchFileErrorReason = {
  /** The file cannot be opened or read. */
  Unreadable: 'file.unreadable',
  /** The file changed (size or modification time) since the batch read its first page. */
  Changed: 'file.changed',
} as const;
export type BatchFileErrorReason = (typeof BatchFileErrorReason)[keyof typeof BatchFileErrorReason];

/** Thrown (not reported) when the file itself cannot be read, or changed between pages. */
export class BatchFileError extends ImagebatchError {
  readonly code = ErrorCode.BatchFileUnreadable;
  constructor(
    readonly reason: BatchFileErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
