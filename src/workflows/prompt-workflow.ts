import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  FailureType,
  handledFailure,
  idempotencyKeyFor,
  KeyOutcome,
  legacyIdempotencyKeyFor,
  type BatchStopDetails,
  type CreateImageResult,
  type KeyProgress,
  type PromptWorkflowInput,
  type RefundedDetails,
  type RejectedDetails,
  type BindingLimit,
  type RowRecord,
  type RowReport,
  type UnknownDetails,
} from '../model';
import { rowBlockedSignal, rowDoneSignal, rowNewKeySignal, rowResumeSignal, rowWaitingSignal } from './definitions';
import { firstDetail, keyProgressIn, rejectionText, workerStop } from './failure-details';
import { RowRecordBuilder } from './row-record';
import {
  CREATE_IMAGE_OPTIONS,
  DEFAULT_MAX_POLL_WAIT_MS,
  RECORD_ROW_OPTIONS,
  ROW_CHECK_EVERY_MS,
  maxWaitMessage,
} from './timeouts';

const DEFAULT_MAX_ATTEMPTS = 3;

/**
 * Patch id: a row of a batch tells its batch before it tries a new key, and starts none when the batch no longer
 * runs (a terminated batch's rows spend nothing more). Rows started before it go on without asking.
 */
export const ASK_BATCH_BEFORE_NEW_KEY = 'ask-batch-before-new-key';

/**
 * Patch id: keys are one-to-one (`ib/<batch>/<row>/a<n>`, see src/model/ids.ts), and the row writes its record into its
 * batch's ledger on disk as it ends (a local activity). Rows started before it keep their keys and write nothing.
 */
export const ONE_TO_ONE_KEYS_AND_LEDGER = 'one-to-one-keys-and-ledger';

/**
 * Patch id: a key that ran out of time says the service's last answer in the row's record (a creation whose status
 * sits under another name than the settings say, for one). Rows that ended before it keep the shorter text.
 */
export const MAX_WAIT_SAYS_LAST_ANSWER = 'max-wait-says-last-answer';

/**
 * Patch id: a row tells its batch, with its record, the limit of the service that bound its worker when its last key
 * ended (the batch's progress says it). Only a row that has one to tell asks for the patch, so a row no limit bound
 * pays no marker. Rows started before it send the record alone.
 */
export const ROW_REPORTS_LIMIT = 'row-reports-limit';

/**
 * Patch id: the row's report says, too, whether the service itself answered a 429 lately (`RowReport.refused`): the
 * batch's window is cut then, and only held when the worker's own pace or quota gate holds rows. Only a row that has
 * it to tell asks for the patch.
 */
export const ROW_REPORTS_REFUSED = 'row-reports-refused';

/**
 * Patch id: a key whose every send failed before any of it left (connection refused, a failed name lookup, the
 * connect timeout) ends `not_sent`, charged nothing, and the row fails, safe to submit again. Asked only by a row
 * whose key ends so; rows before it never got such a failure (only workers of this version throw it).
 */
export const NOT_SENT_KEYS = 'not-sent-keys';

const { createImage } = proxyActivities<Activities>(CREATE_IMAGE_OPTIONS);

const { recordRow } = proxyLocalActivities<Activities>(RECORD_ROW_OPTIONS);

/**
 * The row's batch ended while the row waited on it: nothing will resume it. A private sentinel, a plain error on
 * purpose: thrown and caught inside this workflow, it never leaves it.
 */
class BatchGone extends Error {}

/**
 * One row of a batch: one image creation, paid once, and one record of it, whatever ends it.
 *
 * Why a workflow per row: the row's money-relevant state (which idempotency key is in play, which creation it
 * got, how many refunded attempts were spent) must survive any crash, and Temporal's history is where it survives.
 * Each key is derived from batch, row and attempt number, so a retry after a crash or a lost response re-sends the
 * same key and is never charged twice; only the refunded failures of the interface (502, 503, a retryable failure
 * string) and a 402 start a new key. One activity carries a key from submission to saved images, its waits
 * (Retry-After, the poll interval, backoff) being its own retries: durable, and no history events.
 *
 * The row always completes with its {@link RowRecord}, also when cancelled, and a row of a batch signals that record
 * to its batch itself, whatever ended it: the batch's one channel. The history events of its
 * happy path are counted once, in docs/design.md ("A row's history").
 */
export async function promptWorkflow(input: PromptWorkflowInput): Promise<RowRecord> {
  const builder = new RowRecordBuilder(input);
  const oneToOneAndLedger = patched(ONE_TO_ONE_KEYS_AND_LEDGER);
  const row = new RowKeys(input, builder, oneToOneAndLedger ? idempotencyKeyFor : legacyIdempotencyKeyFor);
  setHandler(rowResumeSignal, () => row.resume());

  try {
    await row.runKeys();
  } catch (err) {
    if (isCancellation(err)) builder.cancelled('cancelled');
    else if (err instanceof BatchGone) builder.cancelled(err.message);
    else builder.broken(err instanceof Error ? err.message : String(err));
  }
  // Not cancellable: a cancel arriving while the row reports must not lose the report (the batch waits for it).
  await CancellationScope.nonCancellable(async () => {
    if (oneToOneAndLedger) {
      const corrected = await recordRow({ outDir: input.outDir, record: builder.record }).catch((err: unknown) => {
        // Its keys' events are on disk (createImage writes them); only `results` after Temporal's retention misses it.
        log.warn('the row record could not be written to the ledger', { error: String(err) });
        return undefined;
      });
      // A key the row could only call unknown that the store shows was never sent (cancelled while its sends failed
      // before a byte left): the store's record, charged nothing, is the row's.
      if (corrected && patched(NOT_SENT_KEYS)) Object.assign(builder.record, corrected);
    }
    await row.tellBatch((h) => {
      const { limit, refused } = row;
      const told = refused && limit && limit !== 'open' && patched(ROW_REPORTS_REFUSED);
      const report: RowReport | undefined =
        limit && limit !== 'open' ? { limit, ...(told ? { refused: true as const } : {}) } : undefined;
      return report && patched(ROW_REPORTS_LIMIT)
        ? h.signal(rowDoneSignal, builder.record, report)
        : h.signal(rowDoneSignal, builder.record);
    });
  });
  return builder.record;
}

/** How a key ended for the row: the row has ended, or a new key follows, counted as an attempt or not. */
type KeyEnd = 'done' | 'counted' | 'uncounted';

/** The row's keys, one after another, to the row's end: its loop, and what it tells its batch. */
class RowKeys {
  /** What the row's last key to end said of the limit that binds. */
  limit: BindingLimit | undefined;
  /** Whether the service answered that key's worker a 429 lately. */
  refused = false;
  private resumed = false;
  private readonly maxAttempts: number;
  private readonly maxPollWaitMs: number;

  constructor(
    private readonly input: PromptWorkflowInput,
    private readonly builder: RowRecordBuilder,
    private readonly keyFor: (batchId: string, rowId: string, keyNumber: number) => string,
  ) {
    this.maxAttempts = input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.maxPollWaitMs = input.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS;
  }

  /** The batch resumes the row (`rowResume`). */
  resume(): void {
    this.resumed = true;
  }

  async runKeys(): Promise<void> {
    const { input, builder, maxAttempts } = this;
    let counted = 0; // refunded failures count against maxAttempts; a 402's new key does not
    for (let keyNumber = 1; counted < maxAttempts; keyNumber += 1) {
      if (keyNumber > 1 && input.parentWorkflowId && patched(ASK_BATCH_BEFORE_NEW_KEY)) {
        const heard = await this.tellBatch((h) => h.signal(rowNewKeySignal, input.rowId, keyNumber));
        if (!heard) throw new BatchGone(`its batch ${input.batchId} ended before the row could try key ${keyNumber}`);
      }
      builder.startKey(keyNumber, this.keyFor(input.batchId, input.rowId, keyNumber));
      const next = await this.runKey();
      if (next === 'done') return;
      if (next === 'counted') counted += 1;
    }
    builder.gaveUp(maxAttempts);
  }

  /** The current key to its end: 'done' when the row has ended, else whether the new key counts as an attempt. */
  private async runKey(): Promise<KeyEnd> {
    const { input, builder } = this;
    const key = builder.current!;
    let progress: KeyProgress | undefined;
    for (;;) {
      let ended: CreateImageResult;
      try {
        ended = await createImage({
          idempotencyKey: key.idempotencyKey,
          request: input.request,
          batchId: input.batchId,
          rowId: input.rowId,
          outDir: input.outDir,
          maxPollWaitMs: this.maxPollWaitMs,
          ...(progress ? { progress } : {}),
          ...(input.ledger ? { ledger: input.ledger } : {}),
          // The canary proves the key until one of its keys' checks has ended (no patch: only canaries started
          // with the batch's patch `canary-proves-key` carry the flag).
          ...(input.proveKey && !builder.record.keyCheck ? { proveKey: true as const } : {}),
        });
      } catch (err) {
        const failure =
          err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : undefined;
        if (!failure) throw err;
        progress = keyProgressIn(failure);
        if (progress) builder.learned(progress);
        const end = await this.keyFailed(err, failure, progress?.creationId ?? key.creationId);
        if (end === 'again') continue;
        return end;
      }
      return this.keyEnded(ended);
    }
  }

  /** What a failure of the key's activity means: the row's end, a new key, or the same key again ('again'). */
  private async keyFailed(err: unknown, failure: ApplicationFailure, creationId?: string): Promise<KeyEnd | 'again'> {
    const { builder } = this;
    switch (handledFailure(failure.type)) {
      case FailureType.Refunded: {
        const details = firstDetail<RefundedDetails>(failure);
        builder.refunded(details?.message ?? failure.message);
        // 503: wait its Retry-After (a durable timer), then a new key.
        if (details?.retryAfterMs) await sleep(details.retryAfterMs);
        return 'counted';
      }
      case FailureType.Rejected:
        builder.rejected(rejectionText(firstDetail<RejectedDetails>(failure), failure.message));
        return 'done';
      case FailureType.Unknown: {
        const details = firstDetail<UnknownDetails>(failure);
        const tries = details?.tries ?? '?';
        builder.unknown(
          KeyOutcome.Unknown,
          `outcome unknown after ${tries} tries: ${details?.lastError ?? failure.message}`,
        );
        return 'done';
      }
      case FailureType.NotSent:
        if (!patched(NOT_SENT_KEYS)) throw err;
        builder.notSent(failure.message);
        return 'done';
      case FailureType.CreationNotFound:
        builder.unknown(
          KeyOutcome.Lost,
          `creation ${creationId ?? '?'} was accepted, then not found: ${failure.message}`,
        );
        return 'done';
      case FailureType.MaxWait: {
        const last = patched(MAX_WAIT_SAYS_LAST_ANSWER)
          ? firstDetail<{ lastAnswer?: unknown }>(failure)?.lastAnswer
          : undefined;
        const lastAnswer = typeof last === 'string' ? last : undefined;
        builder.unknown(KeyOutcome.TimedOut, maxWaitMessage(creationId ?? '?', this.maxPollWaitMs, lastAnswer));
        return 'done';
      }
      case FailureType.DownloadFailed:
        builder.imagesUnsaved(
          `creation ${creationId ?? '?'} succeeded, but its images were not saved: ${failure.message}`,
        );
        return 'done';
      case FailureType.BatchStop:
      case FailureType.Config: {
        const details = firstDetail<BatchStopDetails>(failure) ?? workerStop(failure.message);
        await this.waitForResume(details);
        // 402 was judged and not charged: the next try needs a new key. Any other stop came before the
        // idempotency look-up, or after the acceptance: the same key again, its creation polled, never re-sent.
        if (details.httpStatus === 402 && !creationId) {
          builder.declined(details.message);
          return 'uncounted';
        }
        return 'again';
      }
      case undefined:
        throw err;
    }
  }

  /** The key's activity completed: the row's end, or a new key after a creation that failed and was refunded. */
  private keyEnded(ended: CreateImageResult): KeyEnd {
    const { builder } = this;
    // What the key's attempts learned besides its end: its lagging 404s, the check of the key (a canary's).
    builder.learned({
      ...(ended.outcome === 'reused' ? {} : { creationId: ended.creationId }),
      ...(ended.notFoundPolls ? { notFoundPolls: ended.notFoundPolls } : {}),
      ...(ended.keyCheck ? { keyCheck: ended.keyCheck } : {}),
    });
    if (ended.limit) this.refused = ended.refused === true;
    this.limit = ended.limit ?? this.limit;
    // Served by an earlier request of the same fingerprint: nothing was sent for the key. (No patch: only a worker
    // of this version answers `reused`, so no earlier history reaches this branch.)
    if (ended.outcome === 'reused') {
      builder.reused(ended.reusedFrom, ended.images, ended.error, ended.generated === true);
      return 'done';
    }
    if (ended.outcome === 'succeeded') {
      builder.succeeded(ended.creationId, ended.costUsd, ended.images);
      return 'done';
    }
    builder.creationFailed(ended.creationId, ended.costUsd, ended.error, ended.retryable);
    if (!ended.retryable) {
      builder.failedAsIs();
      return 'done';
    }
    return 'counted';
  }

  /**
   * A batch-level stop: tell the batch, then wait (durably, for as long as it takes) until it resumes us, making
   * sure every so often that the batch still runs: a row whose batch was terminated ends instead of waiting forever.
   */
  private async waitForResume(details: BatchStopDetails): Promise<void> {
    const { input } = this;
    this.resumed = false;
    let heard = await this.tellBatch((h) => h.signal(rowBlockedSignal, input.rowId, details));
    for (;;) {
      if (!heard) throw new BatchGone(`its batch ${input.batchId} ended while the row waited for a resume`);
      if (await condition(() => this.resumed, input.batchCheckEveryMs ?? ROW_CHECK_EVERY_MS)) return;
      heard = await this.tellBatch((h) => h.signal(rowWaitingSignal, input.rowId));
    }
  }

  /** Signals the batch; false when there is a batch and it no longer runs. A row alone has nobody to tell. */
  async tellBatch(send: (h: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>): Promise<boolean> {
    if (!this.input.parentWorkflowId) return true;
    try {
      await send(getExternalWorkflowHandle(this.input.parentWorkflowId));
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      return false;
    }
  }
}
