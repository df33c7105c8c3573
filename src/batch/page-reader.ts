import { type ColumnIndex, indexColumns, parseHeader, type UserColumn, userColumnsOf } from './header';
import type { BatchCursor, UserColumns } from '../model';
import { IdTable } from './id-table';
import { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode, ProblemCollector } from './problems';
import { scanBatchFile } from './format';
import { type ScanLimits, type ScannedRecord } from './scan';
import type { BatchRow } from './schema';
import { inspectSource } from './source';
import { badUtf8Problem, checkRecord } from './validate';

export interface ReadPageOptions extends ScanLimits {
  /**
   * Model for rows whose `model` cell is empty or absent.
   * @default undefined
   */
  defaultModel?: string;
  /**
   * Columns the user owns (`--carry`, `--column`); any other column that is not ours is an error.
   * @default none
   */
  userColumns?: UserColumns;
  /**
   * Data rows (valid or not) per page at most.
   * @default 200
   */
  maxRows?: number;
  /**
   * A page ends after the first record that reaches this many bytes from the page start, so a page holds at
   * most `maxBytes + maxRecordBytes` bytes of CSV. Keeps the activity result well under Temporal's payload
   * limit (2 MB): the JSON of a row is its CSV text plus about 150 bytes.
   * @default 262144 (256 KiB)
   */
  maxBytes?: number;
  /**
   * Problems kept per page; later ones are counted in `problemsDropped`.
   * @default 1000
   */
  maxProblems?: number;
}

export interface BatchPage {
  /** Valid rows, in file order. */
  rows: BatchRow[];
  /** Data rows of this page that were not valid (their problems are in `problems`). */
  invalidRows: number;
  /** Problems of this page, by line. Header and encoding problems make `done` true with no rows. */
  problems: BatchProblem[];
  problemsDropped: number;
  nextCursor: BatchCursor;
  /** True when there is nothing after this page (end of file, or a problem that stops reading). */
  done: boolean;
}

/**
 * Reads one page of rows, starting exactly at `cursor.byteOffset` (or at the header when `cursor` is undefined),
 * and reads only as much of the file as the page needs. Pages end at record boundaries, so quoted line breaks and
 * multi-byte characters are never split. Reading every page in turn yields every row exactly once, in order.
 *
 * Row ids are checked for duplicates within the page only (a page reader keeps no state between pages); the
 * whole-file check is `validateBatchFile`, which the CLI runs before a batch starts.
 */
export async function readBatchPage(
  path: string,
  cursor: BatchCursor | undefined,
  options: ReadPageOptions = {},
): Promise<BatchPage> {
  const maxRows = options.maxRows ?? 200;
  const maxBytes = options.maxBytes ?? 256 * 1024;
  const collector = new ProblemCollector(options.maxProblems ?? 1000);
  const source = await inspectSource(path);
  const rows: BatchRow[] = [];
  const ids = new IdTable(64);
  let invalidRows = 0;
  let headerFailed = false;

  const finish = (nextCursor: BatchCursor, done: boolean): BatchPage => ({
    rows,
    invalidRows,
    problems: collector.sorted(),
    problemsDropped: collector.dropped,
    nextCursor,
    done,
  });

  if (
    cursor?.file &&
    (cursor.file.size !== source.fingerprint.size || cursor.file.mtimeMs !== source.fingerprint.mtimeMs)
  ) {
    throw new BatchFileError(
      BatchFileErrorReason.Changed,
      `batch file ${path} changed since its first page was read (size or modification time); ` +
        'a batch reads the file it started with',
    );
  }
  let state: BatchCursor;
  let index: ColumnIndex | undefined;
  let own: UserColumn[] = [];
  if (cursor === undefined) {
    state = { byteOffset: source.dataStart, line: 1, rowsBefore: 0, header: [], file: source.fingerprint };
    // Comma CSV is what a cursor without a format means: it is left out, so such cursors stay as they were.
    if (source.format !== 'comma') state.format = source.format;
    if (source.encodingProblem) {
      collector.add(source.encodingProblem);
      return finish(state, true);
    }
  } else {
    state = { ...cursor, header: [...cursor.header] };
    index = indexColumns(cursor.header);
    own = userColumnsOf(cursor.header, options.userColumns);
  }
  const start = state.byteOffset;
  let rowsInPage = 0;

  const onRecord = (record: ScannedRecord): boolean => {
    if (headerFailed) return true;
    if (index === undefined) {
      const parsed = parseHeader(record.cells, record.line, options.userColumns);
      state.header = parsed.columns;
      index = parsed.index;
      own = parsed.own;
      parsed.problems.forEach((p) => collector.add(p));
      if (record.badUtf8Line !== undefined) collector.add(badUtf8Problem(record, undefined, []));
      headerFailed = parsed.problems.length > 0 || record.badUtf8Line !== undefined;
      return headerFailed;
    }
    rowsInPage += 1;
    const row = checkRecord(
      record,
      {
        rowNumber: state.rowsBefore + rowsInPage,
        width: state.header.length,
        index,
        columns: state.header,
        defaultModel: options.defaultModel,
        own,
      },
      ids,
      collector,
    );
    if (row) rows.push(row);
    else invalidRows += 1;
    return rowsInPage >= maxRows || record.endOffset - start >= maxBytes;
  };

  const scan = await scanBatchFile({
    path,
    format: state.format ?? 'comma',
    ...(cursor === undefined ? {} : { columns: cursor.header }),
    start,
    line: state.line,
    chunkBytes: Math.min(64 * 1024, Math.max(4096, Math.min(maxBytes, maxRows * 256))),
    maxRecordBytes: options.maxRecordBytes,
    maxFields: options.maxFields,
    onRecord,
    onProblem: (p) => {
      // Malformed CSV (or JSON) before the header was read: the header itself is broken, no row can be trusted.
      if (index === undefined) headerFailed = true;
      collector.add(p);
    },
  });
  if (index === undefined && !headerFailed && !scan.fatal) {
    collector.add({ code: ProblemCode.FileEmpty, line: 1, message: 'the file is empty: no header row' });
  }
  const next: BatchCursor = {
    ...state,
    byteOffset: scan.endOffset,
    line: scan.endLine,
    rowsBefore: state.rowsBefore + rowsInPage,
  };
  const done = !scan.stopped || scan.fatal || headerFailed || scan.endOffset >= source.fingerprint.size;
  return finish(next, done);
}
