import path from 'node:path';
import { Context } from '@temporalio/activity';
import { readBatchPage } from '../batch';
import {
  type BatchCursor,
  type CreationRequest,
  needsReconcile,
  NO_MONEY_HELD,
  type PaidRequests,
  type PaidRequestsInput,
  type RowRecord,
} from '../model';
import { refuseOtherStore } from './key-ledger';
import { releaseRow, scheduleDirOf } from '../ledger/claims';
import {
  importJsonlLedger,
  keyLeftOpen,
  recordAgainstLedger,
  recordFromLedger,
  recordWithStoredCreations,
  recordWithUnsentKeys,
  type Fingerprinter,
  type LedgerRow,
  type LedgerStore,
} from '../ledger';

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
  /** Where the last call stopped among the batch's rows in the store (0 at first). */
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
  /** Where this call stopped (the next call's `after`). */
  next: number;
  done: boolean;
}

/**
 * A row's record whose keys the row could only call unknown, put right by what the store knows of them (see
 * recordWithUnsentKeys and recordWithStoredCreations); undefined when nothing changes.
 */
async function putRight(ledger: LedgerStore, record: RowRecord): Promise<RowRecord | undefined> {
  const open = record.keys.filter(keyLeftOpen);
  if (open.length === 0) return undefined;
  const known = new Map(
    await Promise.all(open.map(async (k) => [k.idempotencyKey, await ledger.key(k.idempotencyKey)] as const)),
  );
  const unsent = recordWithUnsentKeys(record, known);
  return recordWithStoredCreations(unsent ?? record, known) ?? unsent;
}

/**
 * The activities of the ledger store: a row's record written as it ends (a local activity of the row workflow), and
 * the rows `reconcile` resolves. `results` and `reconcile` read the store after Temporal has forgotten the rows.
 */
export function createLedgerActivities(deps: {
  outputRoot: string;
  now: () => number;
  ledger: LedgerStore;
  fingerprintOf: Fingerprinter;
}) {
  return {
    /**
     * Writes the row's record to the store. A key the row could only call unknown (cancelled while it was out) is put
     * right by what the store shows: not charged when no send of it can have been stored, accepted with its creation
     * when the store knows the creation it received. That record is written, and returned.
     */
    async recordRow(input: RecordRowInput): Promise<RowRecord | undefined> {
      const corrected = await putRight(deps.ledger, input.record);
      const record = corrected ?? input.record;
      await deps.ledger.append([{ type: 'row', by: input.by ?? 'row', record }], deps.now());
      // A row of a schedule's run that ended holding no money gives its request's claim back: a later run may try
      // it again. Its request is the one its keys were sent with (a row that sent nothing leaves its claim to the
      // next run's preparation, which gives it back once the row is over for good).
      if (record.keys.every((k) => NO_MONEY_HELD.has(k.outcome))) {
        const scheduleDir = await scheduleDirOf(path.resolve(deps.outputRoot, input.outDir));
        if (scheduleDir) {
          const row = await deps.ledger.row(record.batchId, record.rowId);
          for (const print of new Set(row?.keys.map((k) => k.fingerprint))) {
            await releaseRow(scheduleDir, print, record.batchId);
          }
        }
      }
      return corrected;
    },

    /**
     * The batch file's rows split by whether their request was paid before, as the batch's rows will find them: each
     * row's print with this worker's settings, each earlier key serving one row at most. Read page by page, as the
     * batch reads it; repeats of a request across pages are counted page by page (an estimate).
     */
    async countPaidRequests(input: PaidRequestsInput): Promise<PaidRequests> {
      refuseOtherStore(deps.ledger, input.storeId, 'the command reads');
      const result: PaidRequests = { rows: 0, paid: {}, fresh: {} };
      const add = (into: PaidRequests['paid'], model: string, images: number) => {
        const usage = (into[model] ??= { rows: 0, images: 0 });
        usage.rows += 1;
        usage.images += images;
      };
      const file = path.resolve(deps.outputRoot, input.file);
      for (let cursor: BatchCursor | undefined; ;) {
        Context.current().heartbeat(result.rows);
        const page = await readBatchPage(file, cursor, {
          maxRows: 1000,
          ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
          ...(input.userColumns ? { userColumns: input.userColumns } : {}),
        });
        const prints = page.rows.map((row) => deps.fingerprintOf(row.request).fingerprint);
        const available = input.newImages ? new Map<string, number>() : await deps.ledger.paidCounts(prints);
        // A row that sent a key under this batch id, or was bound to an earlier one, follows it: nothing new is paid.
        const own = input.batchId
          ? await deps.ledger.rowsOf(
              input.batchId,
              page.rows.map((row) => row.rowId),
            )
          : new Map<string, LedgerRow>();
        page.rows.forEach((row, i) => {
          result.rows += 1;
          const before = own.get(row.rowId);
          const ranBefore = before !== undefined && (before.keys.length > 0 || before.reusedFrom !== undefined);
          // Its own key holds its charge, if any: never counted for another row of the file.
          const left = available.get(prints[i]!) ?? 0;
          if (left > 0) available.set(prints[i]!, left - 1);
          const into = ranBefore ? (result.earlier ??= {}) : left > 0 ? result.paid : result.fresh;
          add(into, row.request.model, row.request.num_images ?? 1);
        });
        if (page.done) return result;
        cursor = page.nextCursor;
      }
    },

    /** The next rows of a batch whose money is unresolved (see needsReconcile), from the store. */
    async listUnresolvedRows(input: ListUnresolvedInput): Promise<ListUnresolvedResult> {
      if (input.after === 0) {
        await importJsonlLedger(deps.ledger, path.resolve(deps.outputRoot, input.outDir), deps.fingerprintOf);
      }
      const rows: UnresolvedRow[] = [];
      let after = input.after;
      for (;;) {
        Context.current().heartbeat(after);
        const page = await deps.ledger.rows(input.batchId, after, input.max);
        for (const row of page.rows) {
          const first = row.keys[0]?.request;
          const record = recordAgainstLedger(recordFromLedger(row, first?.prompt ?? '', first?.model ?? ''), row);
          if (!needsReconcile(record)) continue;
          const last = record.keys.at(-1);
          const known = last ? row.keys.find((k) => k.idempotencyKey === last.idempotencyKey) : undefined;
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
        after = page.next;
        // A page is a bound on rows read, so a call's answer stays small; it may hold fewer unresolved rows.
        if (page.done || rows.length > 0) return { rows, next: after, done: page.done };
      }
    },
  };
}
