import type { Client } from '@temporalio/client';
import { lookupRowRecord, type RowLookup } from '../activities/rows';
import { readBatchPage, type BatchCursor, type BatchRow } from '../batch';
import type { RowRecord, RowState } from '../workflows/model';
import { promptWorkflowId } from '../workflows/keys';

/** The state of a row as the results show it: a final state, or where it is while the batch runs. */
export type ResultState = RowState | 'in_flight' | 'not_started';

export interface ResultRow {
  row: BatchRow;
  state: ResultState;
  /** The row's record, once its workflow has closed (however it closed); absent while in flight or not started. */
  result?: RowRecord;
}

/** Options of {@link collectResults}. */
export interface CollectResultsOptions {
  client: Client;
  batchId: string;
  /** The batch file: it lists the rows, in order. */
  file: string;
  defaultModel?: string;
  /**
   * Row workflows asked about at once.
   * @default 16
   */
  concurrency?: number;
}

/**
 * Every row of a batch with its state and record, read from Temporal (the source of truth: each row's workflow
 * result, or for a row closed any other way, its record rebuilt from its history by {@link lookupRowRecord}), in
 * file order. Works while the batch runs: rows in flight and rows not started yet are listed as such.
 */
export async function collectResults(options: CollectResultsOptions): Promise<ResultRow[]> {
  const out: ResultRow[] = [];
  let cursor: BatchCursor | undefined;
  for (;;) {
    const page = await readBatchPage(options.file, cursor, {
      maxRows: 500,
      ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
    });
    const results = await mapLimit(page.rows, options.concurrency ?? 16, (row) => lookup(options, row));
    out.push(...results);
    if (page.done) return out;
    cursor = page.nextCursor;
  }
}

async function lookup(options: CollectResultsOptions, row: BatchRow): Promise<ResultRow> {
  let found: RowLookup;
  try {
    found = await lookupRowRecord(options.client, promptWorkflowId(options.batchId, row.rowId));
  } catch (err) {
    if (err instanceof Error && err.name === 'WorkflowNotFoundError') return { row, state: 'not_started' };
    throw err;
  }
  if (found.status === 'running') return { row, state: 'in_flight' };
  return { row, state: found.record.state, result: found.record };
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  async function lane(): Promise<void> {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
