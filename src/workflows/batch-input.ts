/**
 * What starts a batch (`batchWorkflow`'s input). Types only: the CLI, a scheduled run and the workflow share it.
 */
import type { LedgerScope, StopLossOptions, UserColumns } from '../model';
import type { BatchState } from './batch-state';

export interface BatchWorkflowInput {
  batchId: string;
  /** Path of the batch file, as the workers see it. */
  file: string;
  /** Output folder for images (as the workers see it). */
  outDir: string;
  /** Model of rows that name none. */
  defaultModel?: string;
  /**
   * Columns the user owns (`--carry`, `--column`), passed to the page reader.
   * @default none (a column that is not ours is an error)
   */
  userColumns?: UserColumns;
  /**
   * Rows in flight at most: the adaptive window's ceiling and start (patch `adaptive-window`).
   * @default none: the window starts at 8 and grows up to 256 (WINDOW_DEFAULTS); 8 fixed in a batch started before it
   */
  concurrency?: number;
  /**
   * Attempts per row at most.
   * @default 3
   */
  maxAttempts?: number;
  /**
   * Rows per page read from the file.
   * @default 100
   */
  pageSize?: number;
  /**
   * Net spend the batch may reach: what ended rows spent (a row of unknown outcome counted at its price), plus the
   * price reserved for every row in flight. It pauses when the next row would pass it, and holds a row whose price
   * is not known (the CLI refuses such a batch at start).
   * @default no cap
   */
  spendCapUsd?: number;
  /**
   * Prices per image (USD) by model that the user gave (`--price`), for models whose price the catalog does not show.
   * @default none
   */
  prices?: Record<string, number>;
  /**
   * ISO time after which no row starts; rows not started end as `not_run`.
   * @default no deadline
   */
  deadline?: string;
  /**
   * Longest total wait for one creation to end (polls and the waits between them); a row whose creation has not
   * ended by then fails with a message that says so (`imagebatch run --max-poll-wait`).
   * @default the row's default, DEFAULT_MAX_POLL_WAIT_MS
   */
  maxPollWaitMs?: number;
  /**
   * History length at which a run continues as new, besides the server's own suggestion.
   * @default 10_000
   */
  maxHistoryEvents?: number;
  /**
   * How often the batch asks after rows in flight whose close it cannot see (rows started by an earlier run),
   * while it waits on them: one that was terminated by hand is then counted instead of waited for forever.
   * @default ROW_CHECK_EVERY_MS (5 minutes)
   */
  rowCheckEveryMs?: number;
  /**
   * The ledger store the batch was recorded in (`imagebatch run` gives its id), and whether it asks for new images;
   * each row passes it to its keys.
   * @default none: any store, and earlier requests of the same fingerprint serve rows
   */
  ledger?: LedgerScope;
  /**
   * The canary row first, and the breakers that pause the batch when something would repeat.
   * @default STOP_LOSS_DEFAULTS: a canary, and every breaker on
   */
  stopLoss?: StopLossOptions;
  /** @internal State carried across continue-as-new. */
  state?: BatchState;
}
