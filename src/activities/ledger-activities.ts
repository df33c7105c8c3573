import path from 'node:path';
import { Context } from '@temporalio/activity';
import { type CreationRequest, needsReconcile, NO_MONEY_HELD, type RowRecord } from '../model';
import { releaseRow, scheduleDirOf } from '../ledger/claims';
import { appendLedger, ledgerFileOf, LedgerView, recordAgainstLedger, recordFromLedger } from '../ledger/ledger';

export interface RecordRowInput {
  /** Output folder of the row's batch (the worker's own folder when relative). */
  outDir: string;
  record: RowRecord;
  /**
   * Who ends the row: the row itself, or `reconcile` resolving it later.
   * @default 'row'
   */
  by?: 'row' | 'reconcile';
}

export interface ListUnresolvedInput {
  outDir: string;
  batchId: string;
  /** Rows of the batch (in ledger order) already looked at. */
  after: number;
  /** Rows returned at most. */
  max: number;
}

/** A row whose money is unresolved, and the key that resolves it: its last, re-sent with its own body if need be. */
export interface UnresolvedRow {
  record: RowRecord;
  /** Undefined when the ledger holds no body for the row's last key (it cannot be re-sent as it was). */
  key?: { idempotencyKey: string; request: CreationRequest; creationId?: string };
}

export interface ListUnresolvedResult {
  rows: UnresolvedRow[];
  /** Rows looked at so far (the next call's `after`). */
  next: number;
  done: boolean;
}

/**
 * The activities of the ledger: a row's record written as it ends (a local activity of the row workflow), and the
 * rows `reconcile` resolves. `results` and `reconcile` read the ledger after Temporal has forgotten the rows.
 */
export function createLedgerActivities(deps: { outputRoot: string; now: () => number }) {
  const fileOf = (outDir: string) => ledgerFileOf(path.resolve(deps.outputRoot, outDir));
  /**
   * The whole view of each ledger a reconcile is going through, page after page; given up when its last page was
   * listed (the rest of a worker's life needs only the key index).
   */
  const views = new Map<string, LedgerView>();
  return {
    async recordRow(input: RecordRowInput): Promise<void> {
      const file = fileOf(input.outDir);
      await appendLedger(file, [{ type: 'row', by: input.by ?? 'row', record: input.record }], deps.now());
      // A row of a schedule's run that ended holding no money gives its claim back: a later run may try it again.
      if (input.record.keys.every((k) => NO_MONEY_HELD.has(k.outcome))) {
        const scheduleDir = await scheduleDirOf(path.dirname(file));
        if (scheduleDir) await releaseRow(scheduleDir, input.record.rowId, input.record.batchId);
      }
    },

    /** The next rows of a batch whose money is unresolved (see needsReconcile), from its ledger. */
    async listUnresolvedRows(input: ListUnresolvedInput): Promise<ListUnresolvedResult> {
      const file = fileOf(input.outDir);
      const view = views.get(file) ?? new LedgerView(file);
      views.set(file, await view.refresh());
      const all = view.rows(input.batchId);
      const rows: UnresolvedRow[] = [];
      let i = input.after;
      for (; i < all.length && rows.length < input.max; i++) {
        if (i % 1000 === 0) Context.current().heartbeat(i);
        const row = all[i]!;
        const first = row.keys[0]?.request;
        const record = recordAgainstLedger(recordFromLedger(row, first?.prompt ?? '', first?.model ?? ''), row);
        if (!needsReconcile(record)) continue;
        const last = record.keys.at(-1);
        const known = last ? view.key(last.idempotencyKey) : undefined;
        const creationId = last?.creationId ?? known?.creationId;
        rows.push({
          record,
          ...(last && known
            ? {
                key: {
                  idempotencyKey: last.idempotencyKey,
                  request: known.request,
                  ...(creationId ? { creationId } : {}),
                },
              }
            : {}),
        });
      }
      const done = i >= all.length;
      if (done) views.delete(file);
      return { rows, next: i, done };
    },
  };
}
