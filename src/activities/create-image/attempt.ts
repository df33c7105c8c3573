import path from 'node:path';
import type { Context } from '@temporalio/activity';
import type { CreateImageInput, CreateImageResult, KeyProgress } from '../../model';
import { acceptedPending } from '../failures';
import { currentDetails, heartbeat } from '../heartbeat';
import { imagesRefusedStop } from '../images-refused';
import { redactedFailure } from '../redacted-failure';
import { checkKey } from './key-check';
import { consult } from './ledger-consult';
import { accepted as noteAccepted, ended as noteEnded, noteAnswer, recordEnd } from './ledger-writes';
import { keyProgressOf, withProgress } from './progress';
import { reuse } from './reuse';
import type { ImageRun } from './run';
import { pollOwnCreation } from './not-found';
import { lostAfterReplay, replayKey } from './not-found-replay';
import { submitOnce } from './submit';

/** The wait before the check of a key that proves it (the activity's next attempt): none to speak of. */
const CHECK_AT_ONCE_MS = 1;

/**
 * One attempt of {@link CreateImageInput}'s key: the submission while no creation is known, else one poll (and,
 * once it succeeded, the downloads), or the key sent again: to prove the service honours it (key-check.ts), or to
 * find a creation not found for a whole window (not-found-replay.ts). Every failure carries what is known of the key
 * as its second detail.
 */
export async function createImageAttempt(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
): Promise<CreateImageResult> {
  run.timing.noteQueueLag(ctx.info.attempt, ctx.info.currentAttemptScheduledTimestampMs);
  const learned = keyProgressOf(ctx.info.heartbeatDetails);
  const progress: KeyProgress = { ...input.progress, ...learned };
  if (!learned.creationId && progress.creationId) {
    // A creation known from an earlier activity (the row waited out a batch stop): its counts start afresh.
    delete progress.ambiguousTries;
    delete progress.unrecognizedNotFound;
    delete progress.notFoundSinceMs;
    delete progress.notFoundRun;
  }
  heartbeat(ctx, progress);
  try {
    if (!progress.creationId) return await beforeAcceptance(run, input, ctx);
    const known = { ...progress, creationId: progress.creationId };
    const replay = progress.notFoundReplay;
    if (replay?.state === 'other') return lostAfterReplay(replay);
    if (replay?.state === 'due') return await replayKey(run, input, ctx, { ...known, notFoundReplay: replay });
    if (input.proveKey && !progress.keyCheck) return await checkKey(run, input, ctx, known);
    return await pollAndNote(run, input, ctx, known);
  } catch (err) {
    const known = keyProgressOf(currentDetails(ctx));
    const failure = redactedFailure(imagesRefusedStop(err, input.batchId) ?? err, run.deps.apiKey);
    await recordEnd(run.keys, input, failure, known);
    throw withProgress(failure, known);
  }
}

/**
 * One poll of the key's own creation (and the downloads once it succeeded), a 404 read as lag (not-found.ts); the
 * key's end written to the store when it ended.
 */
async function pollAndNote(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
): Promise<CreateImageResult> {
  const result = await pollOwnCreation(run, input, ctx, progress);
  await noteEnded(run.keys, input, result);
  const { keyCheck } = keyProgressOf(currentDetails(ctx));
  return keyCheck ? { ...result, keyCheck } : result;
}

/**
 * No creation known yet: the store answers first (the key's end, an earlier request that serves the row, a creation
 * to follow), else the key is submitted, and once accepted its first poll goes out in the next attempt.
 */
async function beforeAcceptance(run: ImageRun, input: CreateImageInput, ctx: Context): Promise<CreateImageResult> {
  const { now } = run.deps;
  const outDir = path.resolve(run.deps.outputRoot, input.outDir);
  const past = await consult(run.keys, input, outDir);
  if (past.kind === 'answer') return past.result;
  if (past.kind === 'reuse') return reuse(run, input, ctx, outDir, past);
  if (past.kind === 'follow') {
    // The key was accepted before (an earlier run of the row, forgotten by Temporal): its creation is
    // followed, never submitted again.
    const known: KeyProgress = {
      creationId: past.creationId,
      acceptedAtMs: now(),
      ...(past.costUsd === undefined ? {} : { costUsd: past.costUsd }),
    };
    heartbeat(ctx, known);
    if (input.proveKey) return checkKey(run, input, ctx, { ...known, creationId: past.creationId });
    return pollAndNote(run, input, ctx, { ...known, creationId: past.creationId });
  }
  const accepted = await submitOnce(run, { idempotencyKey: input.idempotencyKey, request: input.request }).catch(
    async (err: unknown) => {
      throw await noteAnswer(run.keys, input, err);
    },
  );
  const ticket = run.timing.begin(input.request.model);
  const known: KeyProgress = {
    creationId: accepted.creationId,
    acceptedAtMs: now(),
    ...(accepted.costUsd === undefined ? {} : { costUsd: accepted.costUsd }),
    ...(ticket ? { pollExplore: ticket.explore } : {}),
  };
  heartbeat(ctx, known);
  await noteAccepted(run.keys, input, accepted);
  // Accepted: the check of the key goes at once (the first answer is known); the first poll goes out in the next
  // attempt, no sooner than the poll interval (poll-plan.ts).
  if (input.proveKey) throw acceptedPending(accepted, CHECK_AT_ONCE_MS);
  const bounds = { intervalMs: run.api().pollIntervalMs(), elapsedMs: 0, maxWaitMs: input.maxPollWaitMs };
  throw acceptedPending(accepted, run.timing.delay(input.request.model, known.pollExplore, bounds));
}
