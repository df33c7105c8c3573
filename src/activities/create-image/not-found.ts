import type { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType, type CreateImageInput, type CreateImageResult, type KeyProgress } from '../../model';
import { failureWith, notFoundYet } from '../failures';
import { currentDetails, heartbeat } from '../heartbeat';
import { asRecord } from '../../api/outcome-text';
import { backoffMs, keyProgressOf, note } from './progress';
import type { ImageRun } from './run';
import { pollAndSave } from './save';

/**
 * Reads that lag writes. A service behind a distributed store may answer a poll of a creation it has just accepted
 * `404 ERR_NOT_FOUND` until its store catches up. A 404 of a creation this key was accepted with (its own 202, or the
 * store's record of it) is lag until proven otherwise: the creation is polled again with backoff, never sooner than
 * the poll interval, until `IMAGEGEN_NOT_FOUND_WINDOW_MS` after the first 404 of the run, and within the key's
 * maximum wait. Each such 404 is counted in the key's progress (heartbeat details) and so in the row's record. Past
 * the window, the key is sent again once (not-found-replay.ts); only then is the creation lost. A creation of another
 * batch's key, followed for reuse, keeps the 404's plain meaning (reuse.ts).
 */

/** Answers that say nothing of the creation (a wait, no answer that can be read): they neither end a run nor count. */
const NO_NEWS: ReadonlySet<string> = new Set([
  FailureType.RateLimited,
  FailureType.Ambiguous,
  FailureType.Malformed,
  FailureType.Unreachable,
]);

/** One poll of the key's own creation (and its images saved once it succeeded), a 404 read as lag. */
export async function pollOwnCreation(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
): Promise<CreateImageResult> {
  let result: CreateImageResult;
  try {
    result = await pollAndSave(run, input, ctx, progress);
  } catch (err) {
    throw notFoundAsLag(run, input, ctx, err);
  }
  const polls = keyProgressOf(currentDetails(ctx)).notFoundPolls;
  return polls ? { ...result, notFoundPolls: polls } : result;
}

/**
 * What a failed poll of the key's own creation throws: a 404 ERR_NOT_FOUND within the window is tried again, counted;
 * past it, the creation is lost, the message saying how long it was not found. Any answer that shows the creation
 * ends a run of 404s.
 */
function notFoundAsLag(run: ImageRun, input: CreateImageInput, ctx: Context, err: unknown): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  const known = keyProgressOf(currentDetails(ctx));
  if (err.type !== FailureType.CreationNotFound) {
    if (known.notFoundSinceMs !== undefined && !NO_NEWS.has(err.type ?? '')) endRun(ctx);
    return err;
  }
  const now = run.deps.now();
  const since = known.notFoundSinceMs ?? now;
  const inRun = (known.notFoundRun ?? 0) + 1;
  note(ctx, { notFoundSinceMs: since, notFoundRun: inRun, notFoundPolls: (known.notFoundPolls ?? 0) + 1 });
  const windowMs = run.deps.config.notFoundWindowMs;
  const acceptedAt = known.acceptedAtMs ?? now;
  const creation = known.creationId ?? '?';
  if (now - since < windowMs && now - acceptedAt < input.maxPollWaitMs) {
    return notFoundYet(
      `creation ${creation} not found yet (404 ERR_NOT_FOUND, ${inRun} in ${seconds(now - since)}): the service's ` +
        `reads may lag its writes; polled again until ${seconds(windowMs)} after the first`,
      Math.max(run.api().pollIntervalMs(), backoffMs(run, inRun)),
    );
  }
  const tried = notFoundFor(now - since, inRun);
  const replay = known.notFoundReplay;
  if (!replay && now - acceptedAt < input.maxPollWaitMs) {
    // The window has passed: the same key goes again, once, in the next attempt (not-found-replay.ts).
    note(ctx, { notFoundReplay: { state: 'due', tried } });
    return notFoundYet(
      `creation ${creation} ${tried}: its key is sent again, once, to find it`,
      run.api().pollIntervalMs(),
    );
  }
  const again = replay?.state === 'same' ? `; its key sent again returned it after it ${replay.tried}` : '';
  return failureWith(err, {
    message: `${tried}${again} (IMAGEGEN_NOT_FOUND_WINDOW_MS ${seconds(windowMs)}): ${err.message}`,
  });
}

/** How long, and at how many polls, a creation was answered 404 ERR_NOT_FOUND: for messages. */
export function notFoundFor(spanMs: number, polls: number): string {
  return `answered 404 ERR_NOT_FOUND for ${seconds(spanMs)} (${polls} poll${polls === 1 ? '' : 's'})`;
}

/** A span in whole seconds (`0 s`, `90 s`): the windows are short, and `0` is one of them. */
const seconds = (ms: number): string => `${Math.round(ms / 1000)} s`;

/** An answer showed the creation: the run of 404s is over (their count stays). */
function endRun(ctx: Context): void {
  const { notFoundSinceMs: _since, notFoundRun: _run, ...rest } = asRecord(currentDetails(ctx));
  heartbeat(ctx, rest);
}
