import type { BatchFormat, UserColumns } from '../model';
import { scanBatchFile } from './format';
import { type ColumnIndex, parseHeader, RecordColumn, type UserColumn } from './header';
import { IdTable } from './id-table';
import { type BatchProblem, ProblemCode, ProblemCollector } from './problems';
import { type ScanLimits, type ScannedRecord } from './scan';
import { type BatchRow, validateRow } from './schema';
import { inspectSource } from './source';

export interface ValidateOptions extends ScanLimits {
  /**
   * Model for rows whose `model` cell is empty or absent. A row with neither is an error.
   * @default undefined
   */
  defaultModel?: string;
  /**
   * Columns the user owns (`--carry`, `--column`); any other column that is not ours is an error.
   * @default none
   */
  userColumns?: UserColumns;
  /**
   * Carry every column that is neither ours nor sent (`--column`) into the results, rather than refusing it; the
   * report lists them in `carried`.
   * @default false
   */
  carryOthers?: boolean;
  /**
   * Problems kept in the report; later ones are only counted (`problemsDropped`), so a hostile file cannot
   * blow memory.
   * @default 1000
   */
  maxProblems?: number;
  /**
   * Distinct model names counted one by one; rows of further models are added to `otherModels`.
   * @default 1000
   */
  maxModels?: number;
}

export interface ModelUsage {
  /** Valid rows using the model. */
  rows: number;
  /** Images those rows ask for (`num_images`, default 1): what the cost estimate multiplies by the price. */
  images: number;
}

export interface BatchReport {
  /** True when the file can be run as is: no problem at all. */
  ok: boolean;
  /** False when a fatal problem (unsupported encoding, record too large, too many fields) stopped the read. */
  complete: boolean;
  /** How the file is written: CSV with a comma, a tab or a semicolon between cells, or JSON Lines. */
  format: BatchFormat;
  /** Header columns as written, or null when the file has no header. */
  columns: string[] | null;
  /** Line of the header (of the first object in JSON Lines), when there is one. */
  headerLine?: number;
  /** Columns carried into the results, never sent: those of `--carry`, and with `carryOthers` every other one. */
  carried: string[];
  /** Data rows read (the header and blank lines not counted; malformed CSV records that were skipped neither). */
  rows: number;
  validRows: number;
  invalidRows: number;
  /** Valid rows per model (after the default model was applied). */
  models: Record<string, ModelUsage>;
  /** Valid rows whose model did not fit under `maxModels`. */
  otherModels: ModelUsage;
  /** The first `maxProblems` problems, ordered by line. */
  problems: BatchProblem[];
  /** All problems found, kept or not. */
  problemCount: number;
  problemsDropped: number;
  /**
   * The batches the rows came from (the `batch_id` column of an errors.csv), at most {@link MAX_SOURCE_BATCHES}: `run`
   * refuses the file while one of them is still open, since that batch starts its rows itself.
   */
  sourceBatches: string[];
}

/** Source batches a report names at most. */
export const MAX_SOURCE_BATCHES = 100;

/** What a validation keeps while it reads: the report so far and the tallies behind it. */
interface Validation {
  report: BatchReport;
  collector: ProblemCollector;
  options: ValidateOptions;
  maxModels: number;
  models: Map<string, ModelUsage>;
  sourceBatches: Set<string>;
  ids: IdTable;
  header: { index: ColumnIndex; width: number; own: UserColumn[] } | undefined;
  /** The first record was malformed CSV: there are no columns to check rows against, only CSV to scan. */
  headerBroken: boolean;
}

/**
 * Reads the whole file once, streaming, and reports every problem with its line and field, plus the counts the
 * CLI needs for a cost estimate. Nothing is kept per row except a 12-byte digest of its id (see `IdTable`).
 * Throws `BatchFileError` only when the file cannot be read at all.
 */
export async function validateBatchFile(path: string, options: ValidateOptions = {}): Promise<BatchReport> {
  const v: Validation = {
    report: emptyReport(),
    collector: new ProblemCollector(options.maxProblems ?? 1000),
    options,
    maxModels: options.maxModels ?? 1000,
    models: new Map(),
    sourceBatches: new Set(),
    ids: new IdTable(),
    header: undefined,
    headerBroken: false,
  };
  const { report, collector } = v;

  const source = await inspectSource(path);
  report.format = source.format;
  if (source.encodingProblem) {
    collector.add(source.encodingProblem);
    report.complete = false;
  } else {
    const scan = await scanBatchFile({
      path,
      format: source.format,
      start: source.dataStart,
      line: 1,
      maxRecordBytes: options.maxRecordBytes,
      maxFields: options.maxFields,
      onRecord: (record) => {
        if (v.headerBroken) {
          report.rows += 1;
          report.invalidRows += 1;
        } else if (v.header === undefined) readHeader(v, record);
        else checkDataRow(v, record, v.header);
        return false;
      },
      onProblem: (p) => scanProblem(v, p, source.format),
    });
    report.complete = !scan.fatal;
    if (v.header === undefined && !v.headerBroken && !scan.fatal) {
      collector.add({ code: ProblemCode.FileEmpty, line: 1, message: 'the file is empty: no header row' });
    } else if (v.header !== undefined && report.rows === 0 && !scan.fatal) {
      collector.add({ code: ProblemCode.FileNoRows, line: 2, message: 'the file has a header but no data rows' });
    }
  }

  report.models = Object.fromEntries([...v.models].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  report.problems = collector.sorted();
  report.problemCount = collector.count;
  report.problemsDropped = collector.dropped;
  report.sourceBatches = [...v.sourceBatches];
  report.ok = collector.count === 0;
  return report;
}

/** A report of nothing read yet. */
function emptyReport(): BatchReport {
  return {
    ok: false,
    complete: true,
    format: 'comma',
    columns: null,
    carried: [],
    rows: 0,
    validRows: 0,
    invalidRows: 0,
    models: {},
    otherModels: { rows: 0, images: 0 },
    problems: [],
    problemCount: 0,
    problemsDropped: 0,
    sourceBatches: [],
  };
}

/** The first record: the header's columns, and its problems. */
function readHeader(v: Validation, record: ScannedRecord): void {
  const parsed = parseHeader(record.cells, record.line, v.options.userColumns, {
    carryOthers: v.options.carryOthers ?? false,
  });
  v.report.columns = parsed.columns;
  v.report.headerLine = record.line;
  v.report.carried = parsed.carried;
  v.header = { index: parsed.index, width: parsed.columns.length, own: parsed.own };
  if (record.badUtf8Line !== undefined) {
    v.collector.add({
      code: ProblemCode.InvalidUtf8,
      line: record.badUtf8Line,
      message: `the header has bytes that are not UTF-8 (line ${record.badUtf8Line})`,
    });
  }
  parsed.problems.forEach((p) => v.collector.add(p));
}

/** A data record: its source batch, its problems, and its model's usage when it is valid. */
function checkDataRow(v: Validation, record: ScannedRecord, header: NonNullable<Validation['header']>): void {
  const { report } = v;
  report.rows += 1;
  const sourceAt = header.index.get(RecordColumn.BatchId);
  const source = sourceAt === undefined ? '' : (record.cells[sourceAt] ?? '').trim();
  if (source && v.sourceBatches.size < MAX_SOURCE_BATCHES) v.sourceBatches.add(source);
  const row = checkRecord(
    record,
    {
      rowNumber: report.rows,
      width: header.width,
      index: header.index,
      columns: report.columns ?? [],
      defaultModel: v.options.defaultModel,
      own: header.own,
    },
    v.ids,
    v.collector,
  );
  if (row) {
    report.validRows += 1;
    const { model, num_images: images = 1 } = row.request;
    let usage = v.models.get(model);
    if (usage === undefined && v.models.size < v.maxModels) v.models.set(model, (usage = { rows: 0, images: 0 }));
    usage ??= report.otherModels;
    usage.rows += 1;
    usage.images += images;
  } else {
    report.invalidRows += 1;
  }
}

/** A problem the scanner found; before any header, it breaks the header (no row can be checked). */
function scanProblem(v: Validation, p: BatchProblem, format: BatchFormat): void {
  if (v.header === undefined && !v.headerBroken) {
    v.headerBroken = true;
    v.collector.add({
      code: p.code,
      line: p.line,
      message:
        format === 'jsonl' ? p.message : `the header row is not valid CSV, so no row can be checked: ${p.message}`,
    });
  } else {
    v.collector.add(p);
  }
}

/** The problem for a row holding bytes that are not UTF-8, naming the field whose text was damaged. */
export function badUtf8Problem(
  record: ScannedRecord,
  rowId: string | undefined,
  columns: readonly string[],
): BatchProblem {
  const line = record.badUtf8Line ?? record.line;
  const field = columns[record.cells.findIndex((c) => c.includes('\uFFFD'))];
  return {
    code: ProblemCode.InvalidUtf8,
    line,
    ...(field === undefined ? {} : { field }),
    ...(rowId === undefined ? {} : { rowId }),
    message: `line ${line} has bytes that are not UTF-8; save the file as UTF-8`,
  };
}

/** Where a data record sits and how to read it, for {@link checkRecord}. */
export interface RecordContext {
  /** 1-based data-row number (for `row-<n>` ids). */
  rowNumber: number;
  width: number;
  index: ColumnIndex;
  /** Header columns, for messages. */
  columns: readonly string[];
  defaultModel: string | undefined;
  /** The user's own columns. @default none */
  own?: readonly UserColumn[];
}

/**
 * Checks one data record — its cells, its bytes and whether its id was seen before — reporting every problem to
 * `collector`. Returns the row when it is valid. The validator and the page reader share it, so a file is judged
 * the same way whole or page by page.
 */
export function checkRecord(
  record: ScannedRecord,
  context: RecordContext,
  ids: IdTable,
  collector: ProblemCollector,
): BatchRow | undefined {
  const result = validateRow({
    cells: record.cells,
    line: record.line,
    rowNumber: context.rowNumber,
    width: context.width,
    index: context.index,
    defaultModel: context.defaultModel,
    ...(context.own ? { own: context.own } : {}),
  });
  const rowId = result.ok ? result.row.rowId : result.rowId;
  let valid = result.ok;
  if (record.problems) {
    // The reader's own problems (a JSON line that is not an object, a bad key or value) say what is wrong first;
    // the row's cells are not checked further.
    record.problems.forEach((p) => collector.add(rowId === undefined ? p : { ...p, rowId }));
    return undefined;
  }
  if (record.badUtf8Line !== undefined) {
    valid = false;
    collector.add(badUtf8Problem(record, rowId, [...context.columns]));
  }
  if (!result.ok) result.problems.forEach((p) => collector.add(p));
  if (rowId !== undefined) {
    const firstLine = ids.add(rowId, record.line);
    if (firstLine !== undefined) {
      valid = false;
      collector.add({
        code: ProblemCode.DuplicateId,
        line: record.line,
        field: 'id',
        rowId,
        firstLine,
        message: `row id "${rowId}" is already used by the row on line ${firstLine}`,
      });
    }
  }
  return valid && result.ok ? result.row : undefined;
}
