import {
  ActivityFailure,
  ApplicationFailure,
  continueAsNew,
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { UnresolvedRow } from '../activities/ledger-activities';
import {
  FailureType,
  handledFailure,
  KeyOutcome,
  needsReconcile,
  type BatchStopDetails,
  type CreateImageResult,
  type RowRecord,
  type RowState,
  type UnknownDetails,
} from '../model';
import { firstDetail } from './failure-details';
import { NOT_SENT_KEYS } from './prompt-workflow';
import { RowRecordBuilder } from './row-record';
import {
  BATCH_ACTIVITY_START_TO_CLOSE,
  CREATE_IMAGE_OPTIONS,
  DEFAULT_MAX_POLL_WAIT_MS,
  HEARTBEAT_TIMEOUT,
  RECORD_ROW_OPTIONS,
  maxWaitMessage,
} from './timeouts';

export interface ReconcileWorkflowInput {
  batchId: string;
  /** The batch's output folder (as the workers see it): its ledger says what is unresolved. */
  outDir: string;
  /**
   * Rows resolved at once.
   * @default 4
   */
  concurrency?: number;
  /**
   * Longest wait for a creation followed again to end.
   * @default DEFAULT_MAX_POLL_WAIT_MS
   */
  maxPollWaitMs?: number;
  /** @internal Carried across continue-as-new. */
  carried?: { after: number; summary: ReconcileSummary };
}

/** What reconcile did to one row. */
export interface ReconciledRow {
  rowId: string;
  before: RowState;
  after: RowState;
  /** True when no money of the row is unresolved any more. */
  resolved: boolean;
  /** What was done, or why the row is reported. */
  note: string;
}

export interface ReconcileSummary {
  batchId: string;
  /** Rows whose money was unresolved when reconcile looked at them. */
  examined: number;
  resolved: number;
  /** Rows still unresolved: reported, never submitted under a new key. */
  reported: number;
  /** The rows, up to {@link MAX_LISTED} of them (the ledger and the results files hold all). */
  rows: ReconciledRow[];
  /** Set when a batch-level stop (authentication, balance) ended reconcile before every row was looked at. */
  stoppedBy?: string;
}

/** Rows listed in a summary at most; the counts cover all. */
export const MAX_LISTED = 1000;
const PAGE = 50;
/** Rows resolved at once, when the input gives no `concurrency`. */
const CONCURRENCY_DEFAULT = 4;
/** History length at which reconcile continues as new, besides the server's own suggestion. */
const MAX_HISTORY_EVENTS = 5_000;

const { listUnresolvedRows } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

// The same activity and bounds as a row's: one key, from (re)submission to saved images.
const { createImage } = proxyActivities<Activities>(CREATE_IMAGE_OPTIONS);
const { recordRow } = proxyLocalActivities<Activities>(RECORD_ROW_OPTIONS);

/**
 * `imagebatch reconcile`: resolves the rows of a batch whose money is unresolved, without paying twice. Each such
 * row's last key is carried to its end by `createImage`, which asks the ledger first: a creation it knows is
 * followed (polled, its images saved); a key never answered is sent again with its own body, which the service
 * replays without a new charge, while the key is younger than the service's idempotency window; an older one is
 * reported, never sent. No new key is ever tried. Each row's new record goes to the ledger, and the summary says
 * what was resolved and what is reported.
 */
export async function reconcileWorkflow(input: ReconcileWorkflowInput): Promise<ReconcileSummary> {
  const concurrency = Math.max(1, input.concurrency ?? CONCURRENCY_DEFAULT);
  const summary: ReconcileSummary = input.carried?.summary ?? {
    batchId: input.batchId,
    examined: 0,
    resolved: 0,
    reported: 0,
    rows: [],
  };
  let after = input.carried?.after ?? 0;
  for (;;) {
    const page = await listUnresolvedRows({ outDir: input.outDir, batchId: input.batchId, after, max: PAGE });
    for (let i = 0; i < page.rows.length; i += concurrency) {
      const chunk = page.rows.slice(i, i + concurrency);
      const outcomes = await Promise.all(chunk.map((row) => settle(input, row)));
      for (const done of outcomes) {
        summary.examined += 1;
        if (done.resolved) summary.resolved += 1;
        else summary.reported += 1;
        if (summary.rows.length < MAX_LISTED) summary.rows.push(done);
      }
      const stop = outcomes.find((o) => o.stoppedBy);
      if (stop?.stoppedBy) {
        summary.stoppedBy = stop.stoppedBy;
        return summary;
      }
    }
    after = page.next;
    if (page.done) return summary;
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > MAX_HISTORY_EVENTS) {
      return continueAsNew<typeof reconcileWorkflow>({ ...input, carried: { after, summary } });
    }
  }
}

/** One row's last key carried to its end, its new record written: what reconcile did to the row. */
async function settle(
  input: ReconcileWorkflowInput,
  row: UnresolvedRow,
): Promise<ReconciledRow & { stoppedBy?: string }> {
  const before = row.record.state;
  const base = { rowId: row.record.rowId, before };
  if (!row.key) {
    return {
      ...base,
      after: before,
      resolved: false,
      note: "the ledger holds no body for the row's last key: it cannot be sent again as it was",
    };
  }
  const builder = RowRecordBuilder.resume(row.record);
  const key = builder.current;
  let note: string;
  let stoppedBy: string | undefined;
  try {
    const ended: CreateImageResult = await createImage({
      idempotencyKey: row.key.idempotencyKey,
      request: row.key.request,
      batchId: row.record.batchId,
      rowId: row.record.rowId,
      outDir: input.outDir,
      maxPollWaitMs: input.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS,
      ...(row.key.creationId ? { progress: { creationId: row.key.creationId } } : {}),
    });
    if (ended.outcome === 'reused') {
      builder.reused(ended.reusedFrom, ended.images, ended.error, ended.generated === true);
      note = `served by key ${ended.reusedFrom.idempotencyKey} of batch ${ended.reusedFrom.batchId}`;
    } else if (ended.outcome === 'succeeded') {
      builder.succeeded(ended.creationId, ended.costUsd, ended.images);
      note = `creation ${ended.creationId} succeeded; ${ended.images.length} image(s) saved`;
    } else {
      builder.creationFailed(ended.creationId, ended.costUsd, ended.error, ended.retryable);
      if (ended.retryable) builder.endedRefunded();
      else builder.failedAsIs();
      note = `creation ${ended.creationId} failed and was refunded: ${ended.error}`;
    }
  } catch (err) {
    const failure = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : undefined;
    if (!failure) throw err;
    const creationId = key?.creationId ?? row.key.creationId ?? '?';
    switch (handledFailure(failure.type)) {
      case FailureType.Refunded:
        builder.refunded(failure.message);
        builder.endedRefunded();
        note = `the key's submission was refunded: ${failure.message}`;
        break;
      case FailureType.Rejected:
        builder.rejected(failure.message);
        note = `the key was refused, nothing charged: ${failure.message}`;
        break;
      case FailureType.Unknown: {
        const details = firstDetail<UnknownDetails>(failure);
        note = details?.lastError ?? failure.message;
        builder.unknown(KeyOutcome.Unknown, note);
        break;
      }
      case FailureType.NotSent:
        if (!patched(NOT_SENT_KEYS)) throw err;
        note = failure.message;
        builder.notSent(note);
        break;
      case FailureType.CreationNotFound:
        note = `creation ${creationId} was accepted, then not found: ${failure.message}`;
        builder.unknown(KeyOutcome.Lost, note);
        break;
      case FailureType.MaxWait:
        note = maxWaitMessage(creationId, input.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS);
        builder.unknown(KeyOutcome.TimedOut, note);
        break;
      case FailureType.DownloadFailed:
        note = `creation ${creationId} succeeded, but its images were not saved: ${failure.message}`;
        builder.imagesUnsaved(note);
        break;
      case FailureType.BatchStop:
      case FailureType.Config: {
        const details = firstDetail<BatchStopDetails>(failure);
        stoppedBy = details?.message ?? failure.message;
        return { ...base, after: before, resolved: false, note: `not resolved: ${stoppedBy}`, stoppedBy };
      }
      case undefined:
        throw err;
    }
  }
  const record: RowRecord = builder.record;
  await recordRow({ outDir: input.outDir, record, by: 'reconcile' });
  const resolved = !needsReconcile(record);
  return { ...base, after: record.state, resolved, note, ...(stoppedBy ? { stoppedBy } : {}) };
}
