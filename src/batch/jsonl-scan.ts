import { normalizeColumn } from './header';
import { parseFlatObject, type FlatValue } from './jsonl-object';
import { readLines, type FileLine } from './lines';
import { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode, preview } from './problems';
import {
  DEFAULT_MAX_FIELDS,
  DEFAULT_MAX_RECORD_BYTES,
  type ScanInput,
  type ScannedRecord,
  type ScanResult,
} from './scan';

/**
 * JSON Lines batch files: one JSON object a line, as batch APIs take them. Each line becomes a {@link ScannedRecord}
 * like a CSV record, so the header and row checks are those of CSV:
 *
 * - the columns are the keys of the first object, handed on first as a header record (on the first object's line);
 * - a later key outside them is a problem of its row (`json.unknown_key`); a key matches a column as it is written,
 *   or else regardless of case and surrounding spaces; a key left out is an empty cell;
 * - a string is its cell; a number or a boolean is its cell as written (`1024`, `true`); null is an empty cell; an
 *   object or an array is a problem of its row (`json.nested_value`);
 * - a line that is not one JSON object is a problem of its row (`json.invalid`); on the first line, the file has
 *   no columns at all;
 * - blank lines are skipped; a line ends at LF, CRLF or a lone CR, as in CSV (JSON text holds none of them raw);
 * - the bounds are those of CSV: a line longer than `maxRecordBytes`, or an object with more than `maxFields` keys,
 *   stops the read.
 */
export interface JsonLinesInput extends ScanInput {
  /** The columns read on the first page (a later page starts past the first object). @default from the first object */
  columns?: readonly string[];
}

/** The line handler's state: the columns once known, or that the file has none. */
interface Columns {
  columns: string[] | undefined;
  /** The first line was not an object: later lines are rows of a file with no columns. */
  noColumns: boolean;
}

/** Scans a JSON Lines file from `start`, calling back in file order; same contract as `scanRecords`. */
export async function scanJsonLines(input: JsonLinesInput): Promise<ScanResult> {
  const maxRecordBytes = input.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  const maxFields = input.maxFields ?? DEFAULT_MAX_FIELDS;
  const result: ScanResult = { stopped: false, fatal: false, endOffset: input.start, endLine: input.line };
  const state: Columns = { columns: input.columns ? [...input.columns] : undefined, noColumns: false };
  let end: { offset: number; line: number } | undefined;
  try {
    end = await readLines(
      { path: input.path, start: input.start, line: input.line, chunkBytes: input.chunkBytes, maxRecordBytes },
      (line) => handleLine(line, { input, result, state, maxFields }),
      (line) =>
        stopFatal(input, result, {
          code: ProblemCode.RecordTooLarge,
          line,
          message: `the line ${line} is larger than ${maxRecordBytes} bytes; reading stopped here`,
        }),
    );
  } catch (err) {
    throw new BatchFileError(BatchFileErrorReason.Unreadable, `cannot read ${input.path}: ${String(err)}`, {
      cause: err,
    });
  }
  if (end === undefined) return result;
  result.endOffset = end.offset;
  result.endLine = end.line;
  return result;
}

/** What a line is read against: the scan's input and result, the columns so far, the bound on keys. */
interface LineContext {
  input: JsonLinesInput;
  result: ScanResult;
  state: Columns;
  maxFields: number;
}

/** Hands one record on; true when the scan must end (stopped, with `endLine` the line at its end). */
function emit(context: LineContext, record: ScannedRecord, endLine: number): boolean {
  if (!context.input.onRecord(record)) return false;
  context.result.stopped = true;
  context.result.endOffset = record.endOffset;
  context.result.endLine = endLine;
  return true;
}

/** Reports a problem that ends the scan; true (the scan must end). */
function stopFatal(input: JsonLinesInput, result: ScanResult, problem: BatchProblem): boolean {
  result.fatal = true;
  input.onProblem(problem);
  return true;
}

/** One complete line: blank, a header (the first object), a row, or a problem; true when the scan must end. */
function handleLine(fileLine: FileLine, context: LineContext): boolean {
  const { bytes, line: at, start, endOffset } = fileLine;
  const { input, state, maxFields } = context;
  const next = fileLine.hasBreak ? at + 1 : at;
  if (isBlank(bytes)) return false;
  let text: string;
  let badUtf8Line: number | undefined;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    text = bytes.toString('utf8');
    badUtf8Line = at;
  }
  const parsed = parseFlatObject(text);
  const base = (cells: string[], problems: BatchProblem[]): ScannedRecord => ({
    cells,
    line: at,
    endOffset,
    ...(badUtf8Line === undefined ? {} : { badUtf8Line }),
    ...(problems.length ? { problems } : {}),
  });
  if ('message' in parsed) {
    const problem: BatchProblem = {
      code: ProblemCode.JsonInvalid,
      line: at,
      message: `line ${at} ${parsed.message}`,
    };
    if (state.columns === undefined && !state.noColumns) {
      state.noColumns = true;
      input.onProblem({ ...problem, message: `${problem.message}, so the file has no columns` });
      return false;
    }
    return emit(context, base([], [problem]), next);
  }
  if (parsed.values.length > maxFields) {
    return stopFatal(input, context.result, {
      code: ProblemCode.TooManyFields,
      line: at,
      message: `the object on line ${at} has more than ${maxFields} keys; reading stopped here`,
    });
  }
  if (state.noColumns) return emit(context, base([], []), next);
  if (state.columns === undefined) {
    state.columns = parsed.values.map((v) => v.key);
    // The header record ends where the first object starts: a page that stops after it resumes on that object.
    if (emit(context, { cells: [...state.columns], line: at, endOffset: start }, at)) return true;
  }
  return emit(context, base(...cellsOf(parsed.values, state.columns, at)), next);
}

function isBlank(bytes: Buffer): boolean {
  for (const b of bytes) if (b !== 0x20 && b !== 0x09) return false;
  return true;
}

/** The cells of one object under `columns`, and the problems of its keys and values. */
function cellsOf(values: readonly FlatValue[], columns: readonly string[], line: number): [string[], BatchProblem[]] {
  const cells = columns.map(() => '');
  const problems: BatchProblem[] = [];
  const normalized = columns.map(normalizeColumn);
  const seen = new Set<number>();
  for (const { key, kind, raw } of values) {
    let at = columns.indexOf(key);
    if (at < 0) at = normalized.indexOf(normalizeColumn(key));
    if (at < 0) {
      problems.push({
        code: ProblemCode.JsonUnknownKey,
        line,
        field: key,
        message:
          `line ${line}: the key ${preview(key)} is not one of the columns, the keys of the first object ` +
          `(${columns.map((c) => preview(c)).join(', ')})`,
      });
      continue;
    }
    const column = columns[at]!;
    if (seen.has(at)) {
      problems.push({
        code: ProblemCode.JsonInvalid,
        line,
        field: column,
        message: `line ${line}: ${preview(column)} is given twice`,
      });
      continue;
    }
    seen.add(at);
    if (kind === 'nested') {
      problems.push({
        code: ProblemCode.JsonNestedValue,
        line,
        field: column,
        message: `line ${line}: the value of ${preview(key)} is an object or an array; a cell is a string, a number or a boolean`,
      });
    } else if (kind === 'string') {
      cells[at] = JSON.parse(raw) as string;
    } else if (raw !== 'null') {
      cells[at] = raw;
    }
  }
  return [cells, problems];
}
