import { Context } from '@temporalio/activity';
import type { FailureOutcome } from '../../api/classify';
import { submitStep } from '../../api/creation-steps';
import type { SubmitCreationInput, SubmitCreationResult } from '../../model';
import { toApplicationFailure } from '../failures';
import { currentDetails, whileHeartbeating } from '../heartbeat';
import { backoffMs, keyProgressOf, note, priorTries } from './progress';
import type { ImageRun } from './run';

/**
 * POST a creation with its idempotency key: one request. Returns the accepted creation; otherwise throws
 * RateLimited / Ambiguous (retryable, same key), Unknown (after `maxAmbiguousTries` unknown outcomes),
 * Refunded, Rejected, BatchStop or Config (non-retryable).
 */
export async function submitOnce(run: ImageRun, input: SubmitCreationInput): Promise<SubmitCreationResult> {
  const ctx = Context.current();
  const prior = priorTries(ctx);
  const step = submitStep(await whileHeartbeating(ctx, run.api().submit(input, ctx.cancellationSignal)));
  switch (step.kind) {
    case 'accepted':
      run.timing.noteAccepted(run.api());
      return step.accepted;
    case 'held':
      run.timing.noteHeld(step.outcome);
      throw toApplicationFailure(step.outcome);
    case 'unclear':
      return unclear(run, ctx, input, { prior, lastError: step.lastError, failure: step.failure, sent: step.sent });
    case 'ends':
      throw toApplicationFailure(step.outcome);
    case 'unexpected':
      return unclear(run, ctx, input, {
        prior,
        lastError: step.lastError,
        failure: { kind: 'ambiguous', lastError: step.lastError },
        sent: true,
      });
  }
}

/**
 * A submission whose answer could not be read: the same key again after a backoff, until `maxAmbiguousTries`. A send
 * that never left (`sent` false) is waited out like the others, and while no send of the key may have left, the key
 * ends `not_sent` rather than unknown when the tries run out.
 */
function unclear(
  run: ImageRun,
  ctx: Context,
  input: SubmitCreationInput,
  answer: { prior: number; lastError: string; failure: FailureOutcome; sent: boolean },
): never {
  const tries = answer.prior + 1;
  const mayBeSent = answer.sent || keyProgressOf(currentDetails(ctx)).mayBeSent === true;
  if (tries >= run.deps.config.maxAmbiguousTries) {
    run.deps.logger.warn(
      `image api: ${mayBeSent ? 'submission outcome unknown' : 'nothing sent'}, giving up on this key`,
      {
        idempotencyKey: input.idempotencyKey,
        tries,
      },
    );
    const details = { idempotencyKey: input.idempotencyKey, tries, lastError: answer.lastError };
    throw toApplicationFailure(mayBeSent ? { kind: 'unknown', details } : { kind: 'keyNotSent', details });
  }
  // Durable across attempts: the next attempt reads it back from `info.heartbeatDetails`.
  note(ctx, { ambiguousTries: tries, ...(mayBeSent ? { mayBeSent: true as const } : {}) });
  throw toApplicationFailure(answer.failure, backoffMs(run, tries));
}
