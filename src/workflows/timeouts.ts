import type { ActivityOptions, LocalActivityOptions } from '@temporalio/common';
import { CREATE_IMAGE_START_TO_CLOSE, formatWait, KEY_ENDING_FAILURES } from '../model';

/**
 * The bounds of every activity the workflows schedule, in one place (docs/waits.md lists them with every other
 * wait), but `createImage`'s start-to-close timeout, which the activities need too: it is in src/model. Changing them
 * changes no workflow command, so running workflows replay unchanged; a new value applies to the activities
 * scheduled after the worker runs it.
 */

/**
 * Heartbeat timeout of every activity that waits on the network or a file: the activities heartbeat every few
 * seconds while they wait (src/activities/heartbeat.ts), so a worker killed mid-request is noticed, and the
 * attempt retried on another worker, within this time instead of the start-to-close timeout.
 */
export const HEARTBEAT_TIMEOUT = '20 seconds';

/**
 * How `createImage` is scheduled, by a row and by reconcile alike: its waits are its own retries; the failure types
 * that end a key at once are listed in the retry policy too, as a second guard.
 */
export const CREATE_IMAGE_OPTIONS: ActivityOptions = {
  startToCloseTimeout: CREATE_IMAGE_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    nonRetryableErrorTypes: [...KEY_ENDING_FAILURES],
  },
};

/**
 * `recordRow`, a local activity: one line appended to a local file, so quick, and a few tries at most, since the
 * keys' own events are on disk already.
 */
export const RECORD_ROW_OPTIONS: LocalActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 5 },
};

/**
 * The longest wait for one creation to end after its acceptance, polls and waits between them included, when the
 * row's input names none (`--max-poll-wait`); `createImage` ends with MaxWait past it.
 */
export const DEFAULT_MAX_POLL_WAIT_MS = 30 * 60_000;

/** One attempt of a batch's own activities: a page of the file, the model catalog, a row look-up. */
export const BATCH_ACTIVITY_START_TO_CLOSE = '2 minutes';

/**
 * How often a batch waiting on rows it cannot see close (rows of an earlier run) asks whether they still run, and
 * how often a row blocked by a batch-level stop makes sure its batch still runs.
 */
export const ROW_CHECK_EVERY_MS = 5 * 60_000;

/**
 * Why a row gave up on its creation, and what to do: the creation was paid for at acceptance and may still end
 * at the service (a failure is refunded there), so running the row again pays again.
 */
export function maxWaitMessage(creationId: string, maxPollWaitMs: number, lastAnswer?: string): string {
  const last = lastAnswer === undefined ? '' : ` (last answer: ${lastAnswer})`;
  return (
    `creation ${creationId} did not end within the maximum wait of ${formatWait(maxPollWaitMs)}${last}; ` +
    'it was paid for and may still end at the service (a failure is refunded). If the service is only slow, ' +
    'run the row again with a longer --max-poll-wait (a new creation, paid again).'
  );
}
