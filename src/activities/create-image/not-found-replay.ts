import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { answerText, keyNotKeptText } from '../../api/key-check-words';
import { keyMayBeStoredSince } from '../../ledger';
import {
  BatchStopReason,
  formatWait,
  KeyOutcome,
  type CreateImageInput,
  type KeyProgress,
  type NotFoundReplay,
} from '../../model';
import { creationLost, toApplicationFailure } from '../failures';
import { currentDetails, heartbeat } from '../heartbeat';
import { asRecord } from '../../api/outcome-text';
import { secondCreationOf } from './key-check';
import { keyIds } from './ledger-consult';
import { duplicateCreation } from './ledger-writes';
import { note } from './progress';
import { costOf, heldAgain, neverLeftAgain, sendKeyAgain } from './send-again';
import type { ImageRun } from './run';

/**
 * A creation not found for a whole window of reads that lag writes (not-found.ts): its key is sent again, once, with
 * the same body, through the same client. Its own creation back: the service still holds it, and it is polled on in a
 * new window (the key's maximum wait bounds it all). Another creation: the service did not keep the key; that one
 * was charged (an entry of its own in the store and the record), the first is lost, and the batch stops. Any other
 * answer: the creation is lost, the message saying what was tried. A wait (429, a local hold) or a send that never
 * left goes again later; 401 and 403 stop the batch, the replay still due. As the check of a key (key-check.ts), its
 * send stays pending in the store until an answer lets it go again, so a worker killed mid-replay never repeats it.
 */
export async function replayKey(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string; notFoundReplay: NotFoundReplay },
): Promise<never> {
  const { creationId, notFoundReplay: replay } = progress;
  const lost = (why: string): never => {
    throw creationLost(`${replay.tried}; the same key sent again ${why}`);
  };
  const checked = progress.keyCheck?.duplicate ? [progress.keyCheck.duplicate.creationId] : [];
  const second = await secondCreationOf(run, input, checked);
  if (second?.creationId)
    return notKept(run, input, ctx, progress, { creationId: second.creationId, ...costOf(second) });
  const stored = await run.keys.store.key(input.idempotencyKey);
  // Ended lost by an attempt whose own end was then lost with its worker: lost again, nothing sent.
  if (stored?.ended?.outcome === KeyOutcome.Lost) throw creationLost(stored.ended.error ?? `${replay.tried}`);
  if (stored?.creationId === creationId && stored.pendingSinceMs !== undefined) {
    return lost('got no answer known here (the worker stopped): a second charge may have been made');
  }
  // A key older than the service remembers keys would be judged anew (reconcile follows old creations too).
  const since = stored ? keyMayBeStoredSince(stored) : undefined;
  if (since !== undefined && run.keys.now() - since > run.keys.idempotencyWindowMs) {
    throw creationLost(
      `${replay.tried}; its key was first sent longer ago than the service remembers keys ` +
        `(${formatWait(run.keys.idempotencyWindowMs)}, IMAGEGEN_IDEMPOTENCY_WINDOW_MS), so it was not sent again`,
    );
  }
  const { step, answered } = await sendKeyAgain(run, input, ctx);
  switch (step.kind) {
    case 'accepted': {
      if (step.accepted.creationId !== creationId) {
        return notKept(run, input, ctx, progress, { creationId: step.accepted.creationId, ...costOf(step.accepted) });
      }
      await answered();
      // The service still holds it: polled on, its 404s in a new window.
      const { notFoundSinceMs: _since, notFoundRun: _run, ...rest } = asRecord(currentDetails(ctx));
      heartbeat(ctx, { ...rest, notFoundReplay: { state: 'same', tried: replay.tried } });
      throw toApplicationFailure(
        { kind: 'inFlight', status: `creation ${creationId} returned by its key sent again: polled on` },
        run.api().pollIntervalMs(),
      );
    }
    case 'held':
      return heldAgain(run, step, answered);
    case 'unclear':
      if (step.sent)
        return lost(`got no answer that can be read (${step.lastError}): a second charge may have been made`);
      return neverLeftAgain(run, ctx, step, answered, (lastError) => lost(`never left (${lastError})`));
    case 'unexpected':
      return lost(`got an answer that shows no creation (${step.lastError}): a second charge may have been made`);
    case 'ends': {
      const { outcome } = step;
      if (outcome.kind === 'config' || (outcome.kind === 'batchStop' && outcome.details.httpStatus !== 402)) {
        await answered(); // stored nothing: the replay goes once the batch resumes
        throw toApplicationFailure(outcome);
      }
      const said =
        outcome.kind === 'batchStop'
          ? answerText({ ...outcome.details, code: outcome.details.reason })
          : answerText(outcome.details);
      return lost(`did not return it: ${said}`);
    }
  }
}

/**
 * The key sent again made a new creation: the service did not keep it. That creation goes to the store as an entry
 * of its own, the first creation ends lost there, and the batch stops; after the resume the row ends lost.
 */
async function notKept(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string; notFoundReplay: NotFoundReplay },
  second: { creationId: string; costUsd?: number },
): Promise<never> {
  const { creationId, notFoundReplay: replay } = progress;
  const message = keyNotKeptText(run.deps.config, { creationId, tried: replay.tried }, second);
  await duplicateCreation(run.keys, input, path.resolve(run.deps.outputRoot, input.outDir), second, message);
  await run.keys.store.append(
    [{ type: 'ended', ...keyIds(input), outcome: KeyOutcome.Lost, creationId, ...costOf(progress), error: message }],
    run.keys.now(),
  );
  note(ctx, { notFoundReplay: { state: 'other', tried: replay.tried, ...second, message } });
  throw toApplicationFailure({
    kind: 'batchStop',
    details: { reason: BatchStopReason.KeyNotKept, httpStatus: 202, message },
  });
}

/** A creation not kept, after the resume: it ends lost, with what happened; nothing is sent. */
export function lostAfterReplay(replay: NotFoundReplay): never {
  throw creationLost(replay.message ?? `${replay.tried}; the same key sent again made another creation`);
}
