/**
 * A batch file as the workflows see it: pages of rows read from where the last page stopped. Plain JSON data, all of
 * it: it travels through workflow history.
 */
import type { BatchRowInput } from './row';

/** The failure type of a batch file that cannot be read (gone, unreadable, changed since the first page). */
export const BATCH_FILE_FAILURE = 'Batch.File';

/** Size and modification time: enough to notice that a file was replaced or edited between two pages. */
export interface FileStamp {
  size: number;
  mtimeMs: number;
}

/**
 * Where the next page starts. Plain JSON data: it travels through workflow history. The header is read once,
 * on the first page, and carried along so later pages parse from `byteOffset` without going back to line 1.
 */
export interface BatchCursor {
  /** Absolute byte offset where the next record starts (always a record boundary). */
  byteOffset: number;
  /** Physical line at `byteOffset`. */
  line: number;
  /** Data rows before `byteOffset`: row `n` without an `id` cell is `row-<n>`, so the count must carry over. */
  rowsBefore: number;
  /** Header columns, as read on the first page. */
  header: string[];
  /** The file as it was on the first page; a later page refuses to read a file that changed since. */
  file?: FileStamp;
  /**
   * How the file is written, as found on the first page; later pages read it the same way.
   * @default 'comma' (a cursor written before formats were detected)
   */
  format?: BatchFormat;
}

/**
 * How a batch file is written: CSV with a comma, a tab or a semicolon between cells, or JSON Lines (one object a
 * line).
 */
export type BatchFormat = 'comma' | 'tab' | 'semicolon' | 'jsonl';

/**
 * Columns the user owns (`--carry`, `--column`): a batch file may have them besides the request and record columns.
 * Plain JSON: it travels in the batch workflow's input to the page-reading activity.
 */
export interface UserColumns {
  /** Columns carried through untouched: never sent, read back from the batch file into the results. */
  carry?: readonly string[];
  /** Column to body field (a name or dotted path): the cell, trimmed, goes into the request's `extra`. */
  send?: Readonly<Record<string, string>>;
  /**
   * Every column that is not ours is read back as the user's (results time: the batch was checked with its options
   * when it started, so nothing more is checked here).
   * @default false
   */
  readAll?: boolean;
}

export interface ReadBatchPageInput {
  /** Path of the batch file, as the worker sees it. */
  file: string;
  /** Undefined for the first page. */
  cursor?: BatchCursor;
  /** Rows per page at most. */
  maxRows: number;
  /** Model for rows without a `model` column value. */
  defaultModel?: string;
  /** Columns the user owns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
}

export interface ReadBatchPageResult {
  rows: BatchRowInput[];
  /** Rows of this page that were invalid (never started; `imagebatch validate` lists them). */
  invalidRows: number;
  nextCursor: BatchCursor;
  done: boolean;
}
