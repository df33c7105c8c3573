import { createReadStream } from 'node:fs';
import { type Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CsvError, parse } from 'csv-parse';
import { LineIndex } from './line-index';
import { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode } from './problems';

/** One CSV record as the scanner hands it on (blank records are skipped before this). */
export interface ScannedRecord {
  cells: string[];
  /** Physical line where the record starts. */
  line: number;
  /** Absolute byte offset just past the record and its line break: where the next record may begin. */
  endOffset: number;
  /** The first line of this record holding bytes that are not UTF-8, if any (the cells hold U+FFFD there). */
  badUtf8Line?: number;
  /** Problems the reader found in this record itself (JSON Lines: a bad line, key or value): the row is invalid. */
  problems?: BatchProblem[];
}

export interface ScanLimits {
  /**
   * Largest record csv-parse will buffer (the parser counts field characters; delimiters and quotes are
   * extra). A bigger record stops the scan with `csv.record_too_large`: it is almost always a quote that is
   * never closed, and it bounds memory on hostile input.
   * @default 262144 (256 KiB; a valid row is at most about 6,000 characters of prompts)
   */
  maxRecordBytes?: number;
  /**
   * Most fields of one record held while parsing (checked after each 64 KiB chunk, see `watchChunks`).
   * More stops the scan with `csv.too_many_fields`. A complete record with more fields than the header is
   * reported as a ragged row.
   * @default 256
   */
  maxFields?: number;
}

export interface ScanInput extends ScanLimits {
  path: string;
  /**
   * The cell delimiter.
   * @default ','
   */
  delimiter?: string;
  /** Absolute byte offset to start at; must be the start of a record (0, after a BOM, or a cursor's offset). */
  start: number;
  /** Physical line of the byte at `start`. */
  line: number;
  /** Called for each non-blank record, in order. Return true to stop right after this record. */
  onRecord: (record: ScannedRecord) => boolean;
  /**
   * Read size: small for a page (little read past its end), large for a whole-file pass.
   * @default 65536
   */
  chunkBytes?: number;
  /** Called for problems the scanner finds itself (CSV syntax, encoding outside any emitted record). */
  onProblem: (problem: BatchProblem) => void;
}

export interface ScanResult {
  /** True when `onRecord` asked to stop before the end of the file. */
  stopped: boolean;
  /** True when a fatal problem (reported through `onProblem`) ended the scan early. */
  fatal: boolean;
  /** Offset just past the last record handed on when stopped; else the end of the file. */
  endOffset: number;
  /** Physical line of `endOffset`. */
  endLine: number;
}

export const DEFAULT_MAX_RECORD_BYTES = 256 * 1024;
export const DEFAULT_MAX_FIELDS = 256;
const CHUNK_BYTES = 64 * 1024;

// Private sentinels, plain errors on purpose: each is thrown inside the parser and caught below, never escaping.
class StopSignal extends Error {}

class TooManyFields extends Error {
  constructor(readonly bytes: number) {
    super('too many fields');
  }
}

/** The parts of csv-parse's parser that the chunk hook reads (public on `Parser` "for backward compatibility"). */
interface ParserInternals {
  state?: {
    record?: unknown[];
    field?: { length: number };
    quoting?: boolean;
    wasQuoting?: boolean;
    /** Bytes consumed before the part of the input the parser still holds back (a possible CRLF, a quote). */
    bufBytesStart?: number;
  };
  info: { bytes: number };
}

/**
 * Runs after each chunk (64 KiB) is parsed, for two bounds on memory that csv-parse does not give.
 *
 * Fields: csv-parse does not count delimiters towards `max_record_size`, so a line of a million commas would grow
 * one record array without bound. A record still in progress with more than `maxFields` fields stops the scan:
 * memory stays under `maxFields` + one chunk's worth of fields. (csv-parse's `cast` hook could count per field,
 * but it builds three info objects per field and tripled the run time.)
 *
 * Blank lines: when no record is in progress, `onIdle` gets the bytes consumed so far, so the line index can
 * forget the blank lines the parser skipped (see `LineIndex.forgetBefore`).
 */
function watchChunks(parser: Transform, maxFields: number, onIdle: (consumed: number) => void): void {
  const internals = parser as unknown as ParserInternals;
  const transform = parser._transform.bind(parser);
  parser._transform = (chunk: Buffer, encoding: BufferEncoding, callback: TransformCallback) => {
    transform(chunk, encoding, (err?: Error | null) => {
      const state = internals.state;
      const fields = state?.record?.length ?? 0;
      if (fields > maxFields) {
        callback(err ?? new TooManyFields(internals.info.bytes));
        return;
      }
      const idle = fields === 0 && state?.field?.length === 0 && !state.quoting && !state.wasQuoting;
      if (!err && idle && typeof state.bufBytesStart === 'number') onIdle(state.bufBytesStart);
      callback(err);
    });
  };
}

/** Line breaks inside the cells (quoted fields): CRLF counts once, like in the line index. */
function lineBreaks(cells: readonly string[]): number {
  let n = 0;
  for (const c of cells) {
    if (c.indexOf('\n') < 0 && c.indexOf('\r') < 0) continue;
    for (let i = 0; i < c.length; i++) {
      const ch = c.charCodeAt(i);
      if (ch === 10 || (ch === 13 && c.charCodeAt(i + 1) !== 10)) n += 1;
    }
  }
  return n;
}

/** The problem of a record csv-parse skipped (its error `err`), which starts on `line`; `lastLine` is the last read. */
function skippedRecordProblem(err: CsvError, line: number, lastLine: number): BatchProblem {
  switch (err.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return {
        code: ProblemCode.UnclosedQuote,
        line,
        message:
          `a quoted field starting on line ${line} is never closed: ` +
          `everything after it (to line ${lastLine}) was read as that field`,
      };
    case 'CSV_INVALID_CLOSING_QUOTE':
      return {
        code: ProblemCode.InvalidQuote,
        line,
        message: `line ${line}: a closing quote is followed by text; a quote inside a quoted field is written ""`,
      };
    case 'INVALID_OPENING_QUOTE':
      return {
        code: ProblemCode.InvalidQuote,
        line,
        message: `line ${line}: a quote inside an unquoted field; quote the whole field and double inner quotes ("")`,
      };
    default:
      return { code: ProblemCode.Malformed, line, message: `line ${line}: ${err.message}` };
  }
}

/**
 * The problem that ends a scan when `err` is one of the bounds on memory (a record over `maxRecordBytes`, more than
 * `maxFields` fields): the byte offset (from the start of the scan) where its record was, and its problem once the
 * record's line is known. Undefined for any other error.
 */
function fatalProblem(
  err: unknown,
  limits: { maxRecordBytes: number; maxFields: number },
): { bytes: number; problem: (line: number) => BatchProblem } | undefined {
  if (err instanceof CsvError && err.code === 'CSV_MAX_RECORD_SIZE') {
    return {
      bytes: Number(err.bytes),
      problem: (line) => ({
        code: ProblemCode.RecordTooLarge,
        line,
        message:
          `the record at line ${line} is larger than ${limits.maxRecordBytes} bytes (often a quote that is never ` +
          'closed); reading stopped here',
      }),
    };
  }
  if (err instanceof TooManyFields) {
    return {
      bytes: Number(err.bytes),
      problem: (line) => ({
        code: ProblemCode.TooManyFields,
        line,
        message: `the record at line ${line} has more than ${limits.maxFields} fields; reading stopped here`,
      }),
    };
  }
  return undefined;
}

/**
 * Streams a batch file from `start` through the line index and csv-parse, calling back synchronously from
 * inside the parser so that records, parser errors and encoding problems arrive in file order. It reads only
 * as far as the caller wants: after a stop the streams are destroyed (at most one chunk is read ahead).
 *
 * csv-parse options, and why: `bom: false` (the caller handles byte-order marks, so offsets stay exact),
 * record delimiters CRLF, LF and lone CR (the same breaks the line index counts), `relax_column_count`
 * (ragged rows are reported by the row validator with both counts), `skip_records_with_error` with `on_skip`
 * (so one file yields every problem), except that `CSV_MAX_RECORD_SIZE` is rethrown: after it csv-parse 7
 * loses its buffer, so going on would report garbage. Tab-separated files also get `relax_quotes`: a quote in a cell
 * is text there (TSV has no quoting: `"Hello" she said`), though a cell wholly in quotes is still read as quoted.
 */
export async function scanRecords(input: ScanInput): Promise<ScanResult> {
  const maxRecordBytes = input.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  const maxFields = input.maxFields ?? DEFAULT_MAX_FIELDS;
  const base = input.start;
  const index = new LineIndex(base, input.line);
  const result: ScanResult = { stopped: false, fatal: false, endOffset: base, endLine: input.line };

  const problem = (p: BatchProblem): void => {
    if (!result.stopped) input.onProblem(p);
  };
  const flushInvalid = (upTo?: number, from = Number.POSITIVE_INFINITY): number | undefined => {
    let inRecord: number | undefined;
    for (const line of index.takeInvalidLines(upTo)) {
      if (line >= from) inRecord ??= line;
      else problem({ code: ProblemCode.InvalidUtf8, line, message: `line ${line} has bytes that are not UTF-8` });
    }
    return inRecord;
  };

  const parser = parse({
    bom: false,
    delimiter: input.delimiter ?? ',',
    relax_quotes: input.delimiter === '\t',
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    max_record_size: maxRecordBytes,
    on_skip: (err) => {
      if (err === undefined || result.stopped) return undefined;
      if (err.code === 'CSV_MAX_RECORD_SIZE') throw err;
      const line = index.recordLineFrom(base + Number(err.bytes));
      problem(skippedRecordProblem(err, line, index.lastLine));
      return undefined;
    },
    on_record: (cells: string[], context) => {
      if (result.stopped) return null;
      const endOffset = base + context.bytes;
      const endLine = index.lineOf(endOffset - 1);
      const line = endLine - lineBreaks(cells);
      const badUtf8Line = flushInvalid(endLine, line);
      if (cells.every((c) => c.trim() === '')) return null; // a blank line, or `,,,` as spreadsheets write it
      const record: ScannedRecord = { cells, line, endOffset };
      if (badUtf8Line !== undefined) record.badUtf8Line = badUtf8Line;
      if (input.onRecord(record)) {
        result.stopped = true;
        result.endOffset = endOffset;
        result.endLine = index.lineOf(endOffset);
        // Ends the parser's loop at once (csv-parse turns it into a stream error) rather than parsing the
        // rest of the chunk for nothing; the pipeline then destroys the file stream.
        throw new StopSignal();
      }
      return null;
    },
  });

  watchChunks(parser, maxFields, (consumed) => index.forgetBefore(base + consumed));

  try {
    await pipeline(
      createReadStream(input.path, { start: base, highWaterMark: input.chunkBytes ?? CHUNK_BYTES }),
      index,
      parser,
      async (source: AsyncIterable<unknown>) => {
        for await (const _ of source) {
          // on_record returns null: nothing is ever emitted, the parser is drained for its end.
        }
      },
    );
  } catch (err) {
    if (result.stopped) return result;
    const fatal = fatalProblem(err, { maxRecordBytes, maxFields });
    if (fatal) {
      const line = index.recordLineFrom(base + fatal.bytes);
      result.fatal = true;
      flushInvalid(line);
      input.onProblem(fatal.problem(line));
      return result;
    }
    throw new BatchFileError(BatchFileErrorReason.Unreadable, `cannot read ${input.path}: ${String(err)}`, {
      cause: err,
    });
  }
  flushInvalid();
  result.endOffset = index.position;
  result.endLine = index.lineOf(index.position);
  return result;
}
