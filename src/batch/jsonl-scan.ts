import { createReadStream } from 'node:fs';
import { normalizeColumn } from './header';
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

const LF = 0x0a;
const CR = 0x0d;
const CHUNK_BYTES = 64 * 1024;

type Value = { key: string; kind: 'string' | 'number' | 'literal' | 'nested'; raw: string };

/** Scans a JSON Lines file from `start`, calling back in file order; same contract as `scanRecords`. */
export async function scanJsonLines(input: JsonLinesInput): Promise<ScanResult> {
  const maxRecordBytes = input.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  const maxFields = input.maxFields ?? DEFAULT_MAX_FIELDS;
  const result: ScanResult = { stopped: false, fatal: false, endOffset: input.start, endLine: input.line };
  let columns = input.columns ? [...input.columns] : undefined;
  /** The first line was not an object: later lines are rows of a file with no columns. */
  let noColumns = false;
  let parts: Buffer[] = [];
  let length = 0;
  let offset = input.start;
  let line = input.line;
  let pendingCR = false;
  let lineStart = input.start;

  /** Hands one record on; true when the scan must end (stopped, with `endLine` the line at its end). */
  const emit = (record: ScannedRecord, endLine: number): boolean => {
    if (!input.onRecord(record)) return false;
    result.stopped = true;
    result.endOffset = record.endOffset;
    result.endLine = endLine;
    return true;
  };
  const fatal = (problem: BatchProblem): boolean => {
    result.fatal = true;
    input.onProblem(problem);
    return true;
  };

  /** The line now complete (`endOffset` past its break, if it has one): true when the scan must end. */
  const endLine = (endOffset: number, hasBreak: boolean): boolean => {
    const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
    const start = lineStart;
    parts = [];
    length = 0;
    lineStart = endOffset;
    const at = line;
    if (hasBreak) line += 1;
    return handleLine(bytes, at, start, endOffset, hasBreak ? at + 1 : at);
  };

  const handleLine = (bytes: Buffer, at: number, start: number, endOffset: number, next: number): boolean => {
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
      if (columns === undefined && !noColumns) {
        noColumns = true;
        input.onProblem({ ...problem, message: `${problem.message}, so the file has no columns` });
        return false;
      }
      return emit(base([], [problem]), next);
    }
    if (parsed.values.length > maxFields) {
      return fatal({
        code: ProblemCode.TooManyFields,
        line: at,
        message: `the object on line ${at} has more than ${maxFields} keys; reading stopped here`,
      });
    }
    if (noColumns) return emit(base([], []), next);
    if (columns === undefined) {
      columns = parsed.values.map((v) => v.key);
      // The header record ends where the first object starts: a page that stops after it resumes on that object.
      if (emit({ cells: [...columns], line: at, endOffset: start }, at)) return true;
    }
    return emit(base(...cellsOf(parsed.values, columns, at)), next);
  };

  try {
    const stream = createReadStream(input.path, { start: input.start, highWaterMark: input.chunkBytes ?? CHUNK_BYTES });
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let from = 0;
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]!;
        if (pendingCR) {
          pendingCR = false;
          const end = offset + i + (b === LF ? 1 : 0);
          if (endLine(end, true)) return result;
          from = b === LF ? i + 1 : i;
          if (b === LF) continue;
        }
        if (b === LF || b === CR) {
          add(chunk.subarray(from, i));
          if (length > maxRecordBytes && tooLarge()) return result;
          if (b === CR) {
            pendingCR = true;
            from = i + 1;
            continue;
          }
          if (endLine(offset + i + 1, true)) return result;
          from = i + 1;
        }
      }
      add(chunk.subarray(from));
      if (length > maxRecordBytes && tooLarge()) return result;
      offset += chunk.length;
    }
    if ((pendingCR || length > 0) && endLine(offset, pendingCR)) return result;
  } catch (err) {
    throw new BatchFileError(BatchFileErrorReason.Unreadable, `cannot read ${input.path}: ${String(err)}`, {
      cause: err,
    });
  }
  result.endOffset = offset;
  result.endLine = line;
  return result;

  function add(part: Buffer): void {
    if (part.length === 0) return;
    // A line past the bound is not kept: only its length counts from here.
    if (length <= maxRecordBytes) parts.push(Buffer.from(part));
    length += part.length;
  }
  function tooLarge(): boolean {
    return fatal({
      code: ProblemCode.RecordTooLarge,
      line,
      message: `the line ${line} is larger than ${maxRecordBytes} bytes; reading stopped here`,
    });
  }
}

function isBlank(bytes: Buffer): boolean {
  for (const b of bytes) if (b !== 0x20 && b !== 0x09) return false;
  return true;
}

/** The cells of one object under `columns`, and the problems of its keys and values. */
function cellsOf(values: readonly Value[], columns: readonly string[], line: number): [string[], BatchProblem[]] {
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

/**
 * One line as a flat JSON object: its keys and values in order, each value's text as written (a number keeps its
 * digits). JSON.parse checks the syntax first, so the walk below only has valid JSON to read.
 */
export function parseFlatObject(text: string): { values: Value[] } | { message: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { message: `is not valid JSON (${(err as Error).message})` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { message: 'is not a JSON object ({"prompt": "..."})' };
  }
  const values: Value[] = [];
  let i = skipSpace(text, skipSpace(text, 0) + 1);
  while (text[i] !== '}') {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const first = text[start];
    let end: number;
    let kind: Value['kind'];
    if (first === '"') {
      end = stringEnd(text, start);
      kind = 'string';
    } else if (first === '{' || first === '[') {
      end = nestedEnd(text, start);
      kind = 'nested';
    } else {
      end = start;
      while (end < text.length && !/[\s,}]/.test(text[end]!)) end += 1;
      kind = /^[-0-9]/.test(first ?? '') ? 'number' : 'literal';
    }
    values.push({ key, kind, raw: text.slice(start, end) });
    i = skipSpace(text, end);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return { values };
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i]!)) i += 1;
  return i;
}

/** Index just past the JSON string starting at `i` (a quote). */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
  return j + 1;
}

/** Index just past the object or array starting at `i`. */
function nestedEnd(text: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < text.length) {
    const ch = text[j]!;
    if (ch === '"') {
      j = stringEnd(text, j);
      continue;
    }
    if (ch === '{' || ch === '[') depth += 1;
    else if (ch === '}' || ch === ']') depth -= 1;
    j += 1;
    if (depth === 0) break;
  }
  return j;
}
