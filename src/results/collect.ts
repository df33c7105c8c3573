import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { lookupRowRecord, type RowLookup } from '../row-lookup/lookup';
import { readBatchPage, type BatchRow } from '../batch';
import { recordAgainstLedger, recordFromLedger, type LedgerRow, type LedgerStore } from '../ledger';
import { promptWorkflowId, type BatchCursor, type RowRecord, type RowState } from '../model';

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
   * The ledger store: it knows rows Temporal has forgotten (past its retention, or a reset server), and records
   * written after a row closed (by reconcile).
   */
  ledger: LedgerStore;
  /**
   * Row workflows asked about at once.
   * @default 16
   */
  concurrency?: number;
}

/**
 * Every row of a batch with its state and record, in file order. Works while the batch runs: rows in flight and
 * rows not started yet are listed as such. Per row:
 * - its workflow still runs (Temporal): `in_flight`;
 * - else the store's latest record of the row, if it has one: the row's own, or one written later by reconcile,
 *   which knows more than the row did when it closed;
 * - else Temporal's record: the row workflow's result, or for a row closed any other way, its record rebuilt from
 *   its history by {@link lookupRowRecord};
 * - else, when Temporal does not know the row (retention passed) but the ledger knows a key of it, the record
 *   rebuilt from the ledger's keys by {@link recordFromLedger} (`unknown` when money may be held);
 * - else `not_started`.
 */
export async function collectResults(options: CollectResultsOptions): Promise<ResultRow[]> {
  const out: ResultRow[] = [];
  let cursor: BatchCursor | undefined;
  for (;;) {
    const page = await readBatchPage(options.file, cursor, {
      maxRows: 500,
      ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
      // Every column of the user's comes back as it is in the file (`--carry`, `--column`): the batch was checked
      // with its options when it started, and carried cells never travel through workflow history.
      userColumns: { readAll: true },
    });
    const known = await options.ledger.rowsOf(
      options.batchId,
      page.rows.map((r) => r.rowId),
    );
    const results = await mapLimit(page.rows, options.concurrency ?? 16, (row) =>
      lookup(options, row, known.get(row.rowId)),
    );
    out.push(...results);
    if (page.done) return out;
    cursor = page.nextCursor;
  }
}

async function lookup(options: CollectResultsOptions, row: BatchRow, known: LedgerRow | undefined): Promise<ResultRow> {
  let found: RowLookup | undefined;
  try {
    found = await lookupRowRecord(options.client, promptWorkflowId(options.batchId, row.rowId));
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  if (found?.status === 'running') return { row, state: 'in_flight' };
  const chosen =
    known?.record ??
    found?.record ??
    (known && known.keys.length > 0
      ? recordFromLedger(known, row.request.prompt, row.request.model, row.line)
      : undefined);
  // A paid key the chosen record leaves out (a re-run that gave up sooner) is never hidden.
  const record = chosen && known ? recordAgainstLedger(chosen, known) : chosen;
  return record ? { row, state: record.state, result: record } : { row, state: 'not_started' };
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
