import { ApplicationFailure, ApplicationFailureCategory, type ApplicationFailureOptions } from '@temporalio/common';
import type { FailureOutcome } from '../api/classify';
import {
  endsKey,
  FailureType,
  SCHEDULED_RUN_CANNOT_START,
  BATCH_FILE_FAILURE,
  type BatchStopDetails,
  type DownloadFailedDetails,
  type KeyCheck,
} from '../model';

/**
 * Where an outcome of the image service (src/api/classify.ts, plain data) becomes the `ApplicationFailure` an
 * activity throws and a workflow branches on, by its {@link FailureType}. The only place: the API layer knows
 * nothing of Temporal, and workflows read the type, never the message.
 */

/**
 * A failure of one of our types. Non-retryable exactly when the type ends a key (`KEY_ENDING_FAILURES` in
 * src/model/failure.ts, the list the retry policy of `createImage` gives too).
 */
function failure(options: Omit<ApplicationFailureOptions, 'nonRetryable'> & { type: FailureType }): ApplicationFailure {
  return ApplicationFailure.create({ ...options, nonRetryable: endsKey(options.type) });
}

/**
 * A non-retryable answer of the interface that the workflow handles (a refund, a rejection, a batch stop): benign,
 * so the SDK logs it at DEBUG rather than as a worker warning.
 */
function handledAnswer(type: FailureType, message: string, details: unknown): ApplicationFailure {
  return failure({ type, message, category: ApplicationFailureCategory.BENIGN, details: [details] });
}

/**
 * The ApplicationFailure for a failing outcome. `retryDelayMs` is the wait before the next attempt for the
 * outcomes whose wait the caller computes (backoff after an unknown outcome, the poll interval).
 */
export function toApplicationFailure(outcome: FailureOutcome, retryDelayMs?: number): ApplicationFailure {
  const delay = (ms: number | undefined) => (ms === undefined ? {} : { nextRetryDelay: Math.max(1, Math.ceil(ms)) });
  switch (outcome.kind) {
    case 'rateLimited': {
      const { kind: _kind, ...info } = outcome;
      return failure({
        type: FailureType.RateLimited,
        message: outcome.local
          ? `held back locally: the key was told to wait (${outcome.retryAfterMs} ms left)`
          : `HTTP ${outcome.httpStatus} ${outcome.code}: ${outcome.message} (retry after ${outcome.retryAfterMs} ms)`,
        // Expected flow control, not an error: logged at DEBUG by the SDK, not WARN.
        category: ApplicationFailureCategory.BENIGN,
        ...delay(outcome.retryAfterMs),
        details: [info],
      });
    }
    case 'ambiguous':
      return failure({
        type: FailureType.Ambiguous,
        message: `outcome unknown: ${outcome.lastError}`,
        ...delay(Math.max(retryDelayMs ?? 0, outcome.retryAfterMs ?? 0) || retryDelayMs),
        details: [
          {
            lastError: outcome.lastError,
            ...(outcome.httpStatus ? { httpStatus: outcome.httpStatus } : {}),
            ...(outcome.unrecognizedNotFound ? { unrecognizedNotFound: true } : {}),
          },
        ],
      });
    case 'notSent':
      return failure({
        type: FailureType.Unreachable,
        message: `not sent, the service was not reached: ${outcome.lastError}`,
        ...delay(retryDelayMs),
        details: [{ lastError: outcome.lastError, notSent: true }],
      });
    case 'keyNotSent':
      return failure({
        type: FailureType.NotSent,
        message:
          `not sent: the service was not reached in ${outcome.details.tries} tries with key ` +
          `${outcome.details.idempotencyKey}, so nothing was charged (${outcome.details.lastError}); check ` +
          'IMAGEGEN_BASE_URL and that the worker can reach it',
        details: [outcome.details],
      });
    case 'malformed':
      return failure({
        type: FailureType.Malformed,
        message: `unexpected response: ${outcome.lastError}`,
        ...delay(retryDelayMs),
        details: [{ lastError: outcome.lastError, ...(outcome.httpStatus ? { httpStatus: outcome.httpStatus } : {}) }],
      });
    case 'inFlight':
      return failure({
        type: FailureType.Pending,
        message: `creation in flight (status ${outcome.status})`,
        category: ApplicationFailureCategory.BENIGN,
        ...delay(retryDelayMs),
        details: [{ status: outcome.status }],
      });
    case 'refunded':
      return handledAnswer(
        FailureType.Refunded,
        `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message} (refunded)`,
        outcome.details,
      );
    case 'rejected':
      return handledAnswer(
        FailureType.Rejected,
        `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message}`,
        outcome.details,
      );
    case 'batchStop':
      return handledAnswer(
        FailureType.BatchStop,
        `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}: ${outcome.details.message}`,
        outcome.details,
      );
    case 'notFound':
      return failure({
        type: FailureType.CreationNotFound,
        message: `HTTP ${outcome.httpStatus} ${outcome.code}: ${outcome.message}`,
        details: [{ httpStatus: outcome.httpStatus, code: outcome.code, message: outcome.message }],
      });
    case 'unknown':
      return failure({
        type: FailureType.Unknown,
        message: `outcome unknown after ${outcome.details.tries} tries with key ${outcome.details.idempotencyKey}: ${outcome.details.lastError}`,
        details: [outcome.details],
      });
    case 'config':
      return failure({ type: FailureType.Config, message: outcome.message });
  }
}

/**
 * The same failure with another message or details: its type, whether it retries, its delay (every failure of these
 * activities gives it in milliseconds) and its category kept. The one place a failure is rebuilt.
 */
export function failureWith(
  err: ApplicationFailure,
  change: { message?: string; details?: unknown[] },
): ApplicationFailure {
  return ApplicationFailure.create({
    ...(err.type ? { type: err.type } : {}),
    message: change.message ?? err.message,
    nonRetryable: err.nonRetryable ?? false,
    ...(change.details ? { details: change.details } : err.details ? { details: [...err.details] } : {}),
    ...(typeof err.nextRetryDelay === 'number' ? { nextRetryDelay: err.nextRetryDelay } : {}),
    ...(err.category ? { category: err.category } : {}),
  });
}

/**
 * A scheduled run that cannot start (its file missing, unreadable or invalid; `details` say which): never retried,
 * so the run fails at once with the reason and the schedule's next tick runs.
 */
export function scheduledRunCannotStart(
  message: string,
  details: { code: string; reason: string },
): ApplicationFailure {
  return ApplicationFailure.create({
    type: SCHEDULED_RUN_CANNOT_START,
    message,
    nonRetryable: true,
    details: [details],
  });
}

/**
 * A batch file that cannot be read: retried while it may come back (gone, unreadable), never once it changed since
 * the first page (`forGood`).
 */
export function batchFileFailure(
  message: string,
  details: { code: string; reason: string },
  forGood: boolean,
): ApplicationFailure {
  return ApplicationFailure.create({ type: BATCH_FILE_FAILURE, message, nonRetryable: forGood, details: [details] });
}

/**
 * A download that failed: retried (after `retry.retryAfterMs`, when a host said so) when `retry` is given, else for
 * good. `details` say why (a {@link DownloadFailedDetails}, or the reason of a creation's images refused as a whole).
 */
export function downloadFailed(
  message: string,
  details: DownloadFailedDetails | Record<string, unknown>,
  retry?: { retryAfterMs?: number },
): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.DownloadFailed,
    message,
    nonRetryable: retry === undefined,
    ...(retry?.retryAfterMs === undefined ? {} : { nextRetryDelay: Math.max(1, retry.retryAfterMs) }),
    details: [details],
  });
}

/** A value (a row id, a creation id) that cannot name a file or folder: the key's configuration is wrong. */
export function unusableFileName(what: string, value: string): ApplicationFailure {
  return failure({
    type: FailureType.Config,
    message: `${what} ${JSON.stringify(value)} cannot be used as a file name`,
  });
}

/** A batch's or row's folder that is a symbolic link: images are never saved through one. */
export function symlinkedFolder(folder: string): ApplicationFailure {
  return failure({
    type: FailureType.Config,
    message: `the folder ${folder} is a symbolic link: images are not saved through one (remove it, or choose another output folder)`,
  });
}

/** A paid success whose images were refused here as every row's would be: a stop of the batch (images-refused.ts). */
export function imagesRefusedFailure(stop: BatchStopDetails): ApplicationFailure {
  return failure({ type: FailureType.BatchStop, message: stop.message, details: [stop] });
}

/**
 * The key was accepted: its creation is polled from the next attempt on, `delayMs` from now. Expected flow control,
 * like every other Pending: logged at DEBUG by the SDK, not WARN.
 */
export function acceptedPending(accepted: { creationId: string; status: string }, delayMs: number): ApplicationFailure {
  return failure({
    type: FailureType.Pending,
    message: `creation ${accepted.creationId} accepted (status ${accepted.status})`,
    category: ApplicationFailureCategory.BENIGN,
    nextRetryDelay: delayMs,
    details: [{ status: accepted.status, accepted: true }],
  });
}

/**
 * A poll of the key's own creation answered 404 ERR_NOT_FOUND within the window of reads that lag writes: polled again
 * after `delayMs`. Expected while the service's store catches up: logged at DEBUG by the SDK, not WARN.
 */
export function notFoundYet(message: string, delayMs: number): ApplicationFailure {
  return failure({
    type: FailureType.Ambiguous,
    message,
    category: ApplicationFailureCategory.BENIGN,
    nextRetryDelay: Math.max(1, Math.ceil(delayMs)),
    details: [{ lastError: message, httpStatus: 404 }],
  });
}

/** The key's creation is lost: not found for a whole window, and its key sent again did not bring it back. */
export function creationLost(message: string): ApplicationFailure {
  return failure({
    type: FailureType.CreationNotFound,
    message,
    details: [{ httpStatus: 404, code: 'ERR_NOT_FOUND', message }],
  });
}

/**
 * The key was sent a second time to prove it (key-check.ts), and the check ended: its creation is polled from the next
 * attempt on, `delayMs` from now. Flow control: logged at DEBUG by the SDK; the result travels in the key's progress.
 */
export function keyChecked(check: KeyCheck, delayMs: number): ApplicationFailure {
  return failure({
    type: FailureType.Pending,
    message: `key checked (${check.result}): ${check.message}`,
    category: ApplicationFailureCategory.BENIGN,
    nextRetryDelay: Math.max(1, Math.ceil(delayMs)),
    details: [{ status: 'key_checked', keyCheck: check.result }],
  });
}

/** The longest last answer a key that ran out of time carries to its row's record. */
const MAX_LAST_ANSWER_CHARS = 500;

/**
 * A key past its maximum wait whose last answer would be tried again: MaxWait while its creation had not ended (or
 * gave no answer), DownloadFailed for good once it was generated and its images could not be saved.
 */
export function maxWaitFailure(
  creationId: string,
  last: { message: string; generated: boolean; maxPollWaitMs: number },
): ApplicationFailure {
  return ApplicationFailure.create({
    type: last.generated ? FailureType.DownloadFailed : FailureType.MaxWait,
    message: last.generated
      ? `creation ${creationId} succeeded, but its images could not be saved within the maximum wait: ${last.message}`
      : `creation ${creationId} did not end within the maximum wait (last answer: ${last.message})`,
    nonRetryable: true,
    // The last answer, on its own: the row's record says it (a status under another name shows here).
    details: [{ maxPollWaitMs: last.maxPollWaitMs, lastAnswer: last.message.slice(0, MAX_LAST_ANSWER_CHARS) }],
  });
}
