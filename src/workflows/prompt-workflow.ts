import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  TimeoutFailure,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import { RetryState } from '@temporalio/common';
import type { Activities } from '../activities';
import type { PollCreationResult, SubmitCreationResult } from '../activities/types';
import {
  FailureType,
  type BatchStopDetails,
  type RefundedDetails,
  type RejectedDetails,
  type UnknownDetails,
} from '../api/failure-types';
import { rowBlockedSignal, rowDoneSignal, rowResumeSignal } from './definitions';
import { idempotencyKeyFor } from './keys';
import { RowState, type AttemptRecord, type PromptResult, type PromptWorkflowInput, type RowSummary } from './model';
import {
  COLLECT_START_TO_CLOSE,
  DEFAULT_MAX_POLL_WAIT_MS,
  HEARTBEAT_TIMEOUT,
  SUBMIT_START_TO_CLOSE,
  maxWaitMessage,
} from './timeouts';

const DEFAULT_MAX_ATTEMPTS = 3;

/** Patch id: the collect activity reports a row's success to its batch (see CollectCreationInput). */
export const REPORT_FROM_ACTIVITY = 'report-from-activity';
/**
 * Patch id: the maximum wait also ends a row when the server stops retrying the collect activity because the next
 * poll would pass it (retry state TIMEOUT, the last poll's failure as cause). Before, only a deadline reached
 * during an attempt (a TimeoutFailure) did, and a creation that stayed in flight failed the row's workflow.
 */
export const MAX_WAIT_RETRY_STATE = 'max-wait-retry-state';

/** Failure types that end an activity at once; listed in the retry policies too, as a second guard. */
const NON_RETRYABLE = [
  FailureType.Unknown,
  FailureType.Refunded,
  FailureType.Rejected,
  FailureType.BatchStop,
  FailureType.CreationNotFound,
  FailureType.Config,
];

/**
 * One row of a batch: one image creation, paid once.
 *
 * Why a workflow per row: the row's money-relevant state (which idempotency key is in play, which creation id
 * was accepted, how many refunded attempts were spent) must survive any crash, and Temporal's history is
 * where it survives. Each attempt gets a key derived from batch, row and attempt number, so a retry after a
 * crash or a lost response re-sends the same key and is never charged twice; only the refunded failures of the
 * interface (502, 503, a retryable failure string) start a new attempt with a new key. Waits (Retry-After, the
 * poll interval, backoff) are activity retries with `nextRetryDelay`: durable, and they add no history events,
 * so the happy path stays at 17 events.
 */
export async function promptWorkflow(input: PromptWorkflowInput): Promise<PromptResult> {
  const maxAttempts = input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  // Rows of a batch started after this patch have their success reported by the collect activity itself.
  const reportFromActivity = input.parentWorkflowId !== undefined && patched(REPORT_FROM_ACTIVITY);
  let reported = false;
  const maxPollWaitMs = input.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS;
  const { submitCreation, collectCreation } = activitiesFor(maxPollWaitMs);
  const result: PromptResult = {
    batchId: input.batchId,
    rowId: input.rowId,
    ...(input.line === undefined ? {} : { line: input.line }),
    state: RowState.Failed,
    prompt: input.request.prompt,
    model: input.request.model,
    creationIds: [],
    attempts: [],
    images: [],
    chargedUsd: 0,
    refundedUsd: 0,
  };

  let resumed = false;
  setHandler(rowResumeSignal, () => {
    resumed = true;
  });
  /** A batch-level stop: tell the batch, then wait (durably, for as long as it takes) until it resumes us. */
  async function waitForResume(details: BatchStopDetails): Promise<void> {
    resumed = false;
    await notifyParent(input.parentWorkflowId, (h) => h.signal(rowBlockedSignal, input.rowId, details));
    await condition(() => resumed);
  }

  try {
    await run();
  } catch (err) {
    if (isCancellation(err)) {
      result.state = RowState.Cancelled;
      await CancellationScope.nonCancellable(() => notifyParent(input.parentWorkflowId, reportTo(result)));
    } else {
      result.state = RowState.Failed;
      result.error ??= err instanceof Error ? err.message : String(err);
      await notifyParent(input.parentWorkflowId, reportTo(result));
    }
    throw err;
  }
  // Awaited, which costs a row of a batch five history events (22 on its happy path, 17 for a row alone). Sent
  // without waiting it would cost one, but the time-skipping test server then stops skipping time (seen here).
  // Not cancellable: a cancel arriving while the row reports must not lose the report (the batch waits for it).
  if (!reported) {
    await CancellationScope.nonCancellable(() => notifyParent(input.parentWorkflowId, reportTo(result)));
  }
  return result;

  async function run(): Promise<void> {
    let keyNumber = 0; // a new key for every new attempt, 402 re-tries included
    let countedAttempts = 0; // attempts that end in a refunded failure count against maxAttempts
    while (countedAttempts < maxAttempts) {
      keyNumber += 1;
      const record: AttemptRecord = {
        attempt: keyNumber,
        idempotencyKey: idempotencyKeyFor(input.batchId, input.rowId, keyNumber),
        outcome: 'submitting',
      };
      result.attempts.push(record);

      const submitted = await submitWithStops(record, waitForResume);
      if (submitted.kind === 'refunded') {
        countedAttempts += 1;
        continue;
      }
      if (submitted.kind === 'new_key') continue;
      if (submitted.kind === 'end') {
        Object.assign(result, submitted.patch);
        return;
      }
      const accepted = submitted.accepted;
      record.creationId = accepted.creationId;
      record.outcome = 'accepted';
      result.creationIds.push(accepted.creationId);
      const charged = accepted.costUsd ?? 0;
      record.chargedUsd = charged;
      result.chargedUsd += charged;

      const ended = await collectWithStops(accepted.creationId, waitForResume);
      if (ended.kind === 'timeout') {
        record.outcome = 'timed_out';
        result.state = RowState.Failed;
        result.error = ended.message;
        result.errorRetryable = true;
        return;
      }
      if (ended.kind === 'lost') {
        // Accepted and charged, then unknown to the service: the money may be spent, so reconcile, do not retry.
        record.outcome = 'lost';
        result.state = RowState.Unknown;
        result.unknownKey = record.idempotencyKey;
        result.error = ended.message;
        result.errorRetryable = false;
        return;
      }
      const { poll, images } = ended;
      record.outcome = poll.outcome;
      if (poll.outcome === 'succeeded') {
        result.state = RowState.Succeeded;
        result.images = images;
        delete result.error;
        delete result.errorRetryable;
        return;
      }
      // A failed creation is refunded in full, automatically.
      const refunded = poll.costUsd ?? charged;
      record.refundedUsd = refunded;
      record.error = poll.error;
      result.refundedUsd += refunded;
      result.error = poll.error;
      result.errorRetryable = poll.retryable;
      if (!poll.retryable) {
        result.state = RowState.Failed;
        return;
      }
      countedAttempts += 1;
    }
    result.state = RowState.Failed;
    result.error = `${result.error ?? 'failed'} (gave up after ${maxAttempts} attempts)`;
  }

  type SubmitStep =
    | { kind: 'accepted'; accepted: SubmitCreationResult }
    | { kind: 'refunded' }
    | { kind: 'new_key' }
    | { kind: 'end'; patch: Partial<PromptResult> };

  async function submitWithStops(
    record: AttemptRecord,
    wait: (details: BatchStopDetails) => Promise<void>,
  ): Promise<SubmitStep> {
    for (;;) {
      try {
        return {
          kind: 'accepted',
          accepted: await submitCreation({ idempotencyKey: record.idempotencyKey, request: input.request }),
        };
      } catch (err) {
        const failure = applicationFailureOf(err);
        if (!failure) throw err;
        record.outcome = failure.type ?? 'failed';
        switch (failure.type) {
          case FailureType.Refunded: {
            const details = firstDetail<RefundedDetails>(failure);
            record.error = details?.message ?? failure.message;
            result.error = record.error;
            result.errorRetryable = true;
            // 503: wait its Retry-After (a durable timer), then a new attempt with a new key.
            if (details?.retryAfterMs) await sleep(details.retryAfterMs);
            return { kind: 'refunded' };
          }
          case FailureType.Rejected: {
            const details = firstDetail<RejectedDetails>(failure);
            return {
              kind: 'end',
              patch: { state: RowState.Failed, error: rejectionText(details, failure.message), errorRetryable: false },
            };
          }
          case FailureType.Unknown: {
            const details = firstDetail<UnknownDetails>(failure);
            return {
              kind: 'end',
              patch: {
                state: RowState.Unknown,
                unknownKey: record.idempotencyKey,
                error: `outcome unknown after ${details?.tries ?? '?'} tries: ${details?.lastError ?? failure.message}`,
                errorRetryable: false,
              },
            };
          }
          case FailureType.BatchStop: {
            const details = firstDetail<BatchStopDetails>(failure);
            await wait(details ?? unknownStop(failure.message));
            // 401/403 stopped before the idempotency look-up: the same key again. 402 was judged: a new key.
            if (details?.httpStatus === 402) return { kind: 'new_key' };
            continue;
          }
          default:
            throw err;
        }
      }
    }
  }

  async function collectWithStops(
    creationId: string,
    wait: (details: BatchStopDetails) => Promise<void>,
  ): Promise<
    | { kind: 'ended'; poll: PollCreationResult; images: PromptResult['images'] }
    | { kind: 'timeout'; message: string }
    | { kind: 'lost'; message: string }
  > {
    for (;;) {
      try {
        const ended = await collectCreation({
          creationId,
          batchId: input.batchId,
          rowId: input.rowId,
          outDir: input.outDir,
          ...(reportFromActivity && input.parentWorkflowId
            ? { reportOnSuccess: { parentWorkflowId: input.parentWorkflowId, summary: summaryOf(result) } }
            : {}),
        });
        if (reportFromActivity && ended.poll.outcome === 'succeeded') reported = true;
        return { kind: 'ended', ...ended };
      } catch (err) {
        if (
          err instanceof ActivityFailure &&
          (err.cause instanceof TimeoutFailure ||
            (err.retryState === RetryState.TIMEOUT && patched(MAX_WAIT_RETRY_STATE)))
        ) {
          return { kind: 'timeout', message: maxWaitMessage(creationId, maxPollWaitMs) };
        }
        const failure = applicationFailureOf(err);
        if (failure?.type === FailureType.BatchStop) {
          await wait(firstDetail<BatchStopDetails>(failure) ?? unknownStop(failure.message));
          continue;
        }
        if (failure?.type === FailureType.CreationNotFound) {
          return { kind: 'lost', message: `creation ${creationId} was accepted, then not found: ${failure.message}` };
        }
        throw err;
      }
    }
  }
}

/**
 * The row's two activities. Both heartbeat while a request is in flight, so a dead worker's attempt is retried
 * after HEARTBEAT_TIMEOUT; the collect activity's schedule-to-close timeout is the row's maximum wait for its
 * creation, every poll and wait between polls included.
 */
function activitiesFor(maxPollWaitMs: number) {
  const submit = proxyActivities<Activities>({
    startToCloseTimeout: SUBMIT_START_TO_CLOSE,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: {
      initialInterval: '1 second',
      backoffCoefficient: 2,
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
  const collect = proxyActivities<Activities>({
    startToCloseTimeout: COLLECT_START_TO_CLOSE,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    scheduleToCloseTimeout: maxPollWaitMs,
    retry: {
      initialInterval: '1 second',
      backoffCoefficient: 2,
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
  return { submitCreation: submit.submitCreation, collectCreation: collect.collectCreation };
}

function applicationFailureOf(err: unknown): ApplicationFailure | undefined {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause;
  return undefined;
}

function firstDetail<T>(failure: ApplicationFailure): T | undefined {
  return failure.details?.[0] as T | undefined;
}

function rejectionText(details: RejectedDetails | undefined, fallback: string): string {
  if (!details) return fallback;
  const fields = details.fieldErrors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return fields ? `${details.message} (${fields})` : details.message;
}

function unknownStop(message: string): BatchStopDetails {
  return { reason: 'authentication_required', httpStatus: 0, message };
}

/** What the batch learns of a row. */
function summaryOf(result: PromptResult): RowSummary {
  return {
    rowId: result.rowId,
    state: result.state,
    chargedUsd: result.chargedUsd,
    refundedUsd: result.refundedUsd,
    attempts: result.attempts.length,
  };
}

function reportTo(result: PromptResult) {
  const summary = summaryOf(result);
  return (h: ReturnType<typeof getExternalWorkflowHandle>) => h.signal(rowDoneSignal, summary);
}

/** Signals the batch, if there is one. A batch that has already closed has nobody to tell: not an error. */
async function notifyParent(
  parentWorkflowId: string | undefined,
  send: (h: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>,
): Promise<void> {
  if (!parentWorkflowId) return;
  try {
    await send(getExternalWorkflowHandle(parentWorkflowId));
  } catch (err) {
    if (isCancellation(err)) throw err;
  }
}
