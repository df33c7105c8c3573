import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type {
  CreateImageInput,
  CreateImageResult,
  DownloadedImage,
  DownloadImagesInput,
  KeyProgress,
} from '../../model';
import { downloadImages, downloadSettings } from '../download';
import { maxWaitFailure, toApplicationFailure } from '../failures';
import { currentDetails, heartbeat, whileHeartbeating } from '../heartbeat';
import { checkImageCount, creationByteBudget, noImageFailure } from '../image-limits';
import { asRecord } from '../../api/outcome-text';
import { pollOnceCounting } from './poll';
import { keyProgressOf, note } from './progress';
import type { ImageRun } from './run';

/** A key's creation polled once, and once it succeeded, its images saved: one attempt of `createImage`. */

/** Downloads `input`'s images; `maxTotalBytes` is a creation's byte budget (see image-limits.ts). */
export async function download(
  run: ImageRun,
  input: DownloadImagesInput,
  maxTotalBytes?: number,
): Promise<DownloadedImage[]> {
  const ctx = Context.current();
  const work = downloadImages(input, {
    ...downloadSettings(run.deps.config),
    dispatcher: run.downloadDispatcher(),
    outputRoot: run.deps.outputRoot,
    ...(maxTotalBytes === undefined ? {} : { maxTotalBytes }),
    now: run.deps.now,
    // Progress joins the details already there (the count of unknown outcomes stays for the next attempt).
    progress: (p) => heartbeat(ctx, { ...asRecord(currentDetails(ctx)), download: p }),
    signal: ctx.cancellationSignal,
  });
  return whileHeartbeating(ctx, work);
}

/**
 * One poll of the key's creation (no sooner than the minimum interval after the previous one) and, once it
 * succeeded, its images saved. Past the maximum wait, an answer that would be tried again ends the key.
 */
export async function pollAndSave(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
): Promise<CreateImageResult> {
  const { now } = run.deps;
  const { creationId } = progress;
  const acceptedAt = progress.acceptedAtMs ?? now();
  if (progress.acceptedAtMs === undefined) note(ctx, { acceptedAtMs: acceptedAt });
  holdUntilInterval(run, progress);
  note(ctx, { lastPollAtMs: now() });
  try {
    const bounds = () => ({
      intervalMs: run.api().pollIntervalMs(),
      elapsedMs: now() - acceptedAt,
      maxWaitMs: input.maxPollWaitMs,
    });
    const poll = await pollOnceCounting(run, creationId, ctx, () =>
      run.timing.delay(input.request.model, progress.pollExplore, bounds()),
    );
    if (progress.pollExplore) run.timing.observe(input.request.model, now() - acceptedAt);
    const costUsd = poll.costUsd ?? progress.costUsd;
    const cost = costUsd === undefined ? {} : { costUsd };
    if (poll.outcome === 'failed') {
      return { outcome: 'failed', creationId, ...cost, error: poll.error, retryable: poll.retryable };
    }
    note(ctx, { generated: true, ...cost }); // paid: the record's cost stays with the key, images saved or not
    // A success with no image is not a success: paid, nothing to save, the row ends images_unsaved.
    if (poll.images.length === 0) {
      throw noImageFailure({
        creationId,
        status: poll.status,
        recordKeys: poll.recordKeys,
        imageFields: run.deps.config.imageFields,
      });
    }
    checkImageCount(creationId, poll.images, input.request.num_images);
    const images = await download(
      run,
      { batchId: input.batchId, rowId: input.rowId, creationId, images: poll.images, outDir: input.outDir },
      creationByteBudget(input.request.num_images, run.deps.config.maxDownloadBytes),
    );
    return { outcome: 'succeeded', creationId, ...cost, images };
  } catch (err) {
    // Past the maximum wait, an answer that would be tried again ends the key instead: a creation still in flight
    // (or unanswered), or images that could not be saved yet. Judged after a poll, so a row that waited out a
    // batch stop longer than the maximum wait still asks once.
    const again = err instanceof ApplicationFailure && !err.nonRetryable;
    if (!again || now() - acceptedAt < input.maxPollWaitMs) throw err;
    throw maxWaitFailure(creationId, {
      message: err.message,
      generated: keyProgressOf(currentDetails(ctx)).generated === true,
      maxPollWaitMs: input.maxPollWaitMs,
    });
  }
}

/**
 * No poll of a creation sooner than the minimum interval after the previous one, whatever came between (an unknown
 * outcome's short backoff, a download retry, a Retry-After of 0 or in the past). The attempt ends unsent and the
 * activity's retry waits the rest of the interval (durably, like any wait).
 */
function holdUntilInterval(run: ImageRun, progress: KeyProgress & { creationId: string }): void {
  const since = progress.lastPollAtMs === undefined ? Infinity : run.deps.now() - progress.lastPollAtMs;
  const interval = run.api().pollIntervalMs();
  if (since >= interval) return;
  const retryAfterMs = Math.max(1, Math.ceil(interval - Math.max(0, since)));
  throw toApplicationFailure(
    {
      kind: 'rateLimited',
      httpStatus: 0,
      code: 'MIN_POLL_INTERVAL',
      message: `the previous poll of creation ${progress.creationId} was ${Math.max(0, since)} ms ago`,
      retryAfterMs,
      local: true,
    },
    retryAfterMs,
  );
}
