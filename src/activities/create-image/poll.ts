import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { FailureOutcome } from '../../api/classify';
import { pollStep } from '../../api/creation-steps';
import { BatchStopReason, type PollCreationInput, type PollCreationResult } from '../../model';
import { toApplicationFailure } from '../failures';
import { currentDetails, whileHeartbeating } from '../heartbeat';
import { asRecord } from '../../api/outcome-text';
import { backoffMs, countOf, note, priorTries } from './progress';
import type { ImageRun } from './run';
import { checkUnrecognisedStatus } from './status-check';

/**
 * Consecutive poll answers 404 without the service's ERR_NOT_FOUND code after which a key stops its batch: such a
 * run says the address is wrong (IMAGEGEN_CREATION_PATH, a proxy), not that the creation is lost.
 */
export const UNRECOGNIZED_NOT_FOUND_LIMIT = 5;

/** One GET of a creation: its end, or a failure that makes the activity try again later. */
export async function pollOnce(
  run: ImageRun,
  input: PollCreationInput,
  inFlightDelayMs: () => number = () => run.api().pollIntervalMs(),
): Promise<PollCreationResult> {
  const ctx = Context.current();
  const prior = priorTries(ctx);
  const step = pollStep(await whileHeartbeating(ctx, run.api().getCreation(input.creationId, ctx.cancellationSignal)));
  const transient = (o: FailureOutcome): never => {
    note(ctx, { ambiguousTries: prior + 1 });
    throw toApplicationFailure(o, backoffMs(run, prior + 1));
  };
  if (prior > 0 && step.kind !== 'unclear') note(ctx, { ambiguousTries: 0 });
  switch (step.kind) {
    case 'ended':
      return step.result;
    case 'inFlight':
      await checkUnrecognisedStatus(run, ctx, step.outcome); // a status in no set: its record judged by its bytes
      // No sooner than the answer's Retry-After, if it had one.
      throw toApplicationFailure(step.outcome, Math.max(inFlightDelayMs(), step.outcome.retryAfterMs ?? 0));
    case 'unclear':
      return transient(step.outcome);
    case 'held':
    case 'ends':
      throw toApplicationFailure(step.outcome);
    case 'unexpected':
      return transient({ kind: 'malformed', lastError: step.lastError });
  }
}

/** {@link pollOnce}, counting a run of 404s without the service's code: past the limit the batch stops. */
export async function pollOnceCounting(
  run: ImageRun,
  creationId: string,
  ctx: Context,
  inFlightDelayMs: () => number,
): Promise<PollCreationResult> {
  try {
    const poll = await pollOnce(run, { creationId }, inFlightDelayMs);
    // A run ends with any other answer; details are written again only when there was one.
    if (countOf(asRecord(currentDetails(ctx)).unrecognizedNotFound) > 0) note(ctx, { unrecognizedNotFound: 0 });
    return poll;
  } catch (err) {
    const unrecognized = err instanceof ApplicationFailure && asRecord(err.details?.[0]).unrecognizedNotFound === true;
    if (!unrecognized) throw err;
    const count = countOf(asRecord(currentDetails(ctx)).unrecognizedNotFound) + 1;
    note(ctx, { unrecognizedNotFound: count });
    if (count < UNRECOGNIZED_NOT_FOUND_LIMIT) throw err;
    note(ctx, { unrecognizedNotFound: 0, ambiguousTries: 0 });
    throw toApplicationFailure({
      kind: 'batchStop',
      details: {
        reason: BatchStopReason.CreationPathNotFound,
        httpStatus: 404,
        message:
          `${count} polls in a row of creation ${creationId} were answered 404 without the service's ERR_NOT_FOUND ` +
          `code: check IMAGEGEN_CREATION_PATH (now ${run.deps.config.creationPath}) and IMAGEGEN_BASE_URL, then resume`,
      },
    });
  }
}
