import { Context } from '@temporalio/activity';
import type {
  CreateImageInput,
  CreateImageResult,
  DownloadedImage,
  DownloadImagesInput,
  ModelInfo,
  PollCreationInput,
  PollCreationResult,
  SubmitCreationInput,
  SubmitCreationResult,
} from '../model';
import { clipSource, describeImageUrl } from './data-uri';
import { toApplicationFailure } from './failures';
import { whileHeartbeating } from './heartbeat';
import { createImageAttempt } from './create-image/attempt';
import { pollOnce } from './create-image/poll';
import { backoffMs } from './create-image/progress';
import { imageRun, type ImageActivityDeps } from './create-image/run';
import { download } from './create-image/save';
import { submitOnce } from './create-image/submit';

export type { ImageActivityDeps } from './create-image/run';
export { UNRECOGNIZED_NOT_FOUND_LIMIT } from './create-image/poll';

/**
 * The image-service activities. Each attempt sends at most one request to the service; every wait (Retry-After,
 * the poll interval, backoff after an unknown outcome) is the activity's next retry, through `nextRetryDelay`.
 * While a request or a download is in flight the activity heartbeats (see heartbeat.ts), so that the short
 * heartbeat timeouts of the workflows notice a dead worker within seconds. Their parts are in create-image/: the
 * store's rules (ledger-consult.ts, ledger-writes.ts), the submission (submit.ts), the poll (poll.ts), the poll and
 * its downloads (save.ts), an earlier request that serves the row (reuse.ts), one attempt of a key (attempt.ts); when
 * to poll is src/api/poll-timing.ts.
 */
export function createImageActivities(deps: ImageActivityDeps) {
  const run = imageRun(deps);
  return {
    /** `submitOnce` (create-image/submit.ts) as an activity: a single request (the row workflows use createImage). */
    async submitCreation(input: SubmitCreationInput): Promise<SubmitCreationResult> {
      return submitOnce(run, input);
    },

    /**
     * GET a creation once. Returns it when it has ended; throws Pending (retryable after the poll interval)
     * while it is in flight, RateLimited, Ambiguous/Malformed (retryable, backoff), CreationNotFound, BatchStop,
     * Config. An inline image's data does not go into history: its `url` is a description of it
     * (`data:image/png;base64 (N characters) at data[0].b64_json`), so only {@link createImage}, which polls and saves
     * in one attempt, saves inline images.
     */
    async pollCreation(input: PollCreationInput): Promise<PollCreationResult> {
      return withoutInlineData(await pollOnce(run, input));
    },

    /** Downloads a creation's images into `<outDir>/<rowId>/`; throws DownloadFailed. */
    async downloadImages(input: DownloadImagesInput): Promise<DownloadedImage[]> {
      return download(run, input);
    },

    /**
     * One idempotency key from submission to saved images (see {@link CreateImageInput}). Returns how the creation
     * ended; throws Pending, RateLimited, Ambiguous, Malformed, DownloadFailed (retryable) or Unknown, Refunded,
     * Rejected, BatchStop, CreationNotFound, MaxWait, DownloadFailed, Config (non-retryable), each with the key's
     * {@link KeyProgress} as its second detail.
     */
    async createImage(input: CreateImageInput): Promise<CreateImageResult> {
      const result = await createImageAttempt(run, input, Context.current());
      const now = deps.now();
      const { timing } = run;
      return {
        ...result,
        limit: timing.bindingLimit(now),
        ...(timing.refusedNow(now) ? { refused: true as const } : {}),
      };
    },

    /** GET the model catalog (prices in USD per request where the service says them). */
    async fetchModels(): Promise<ModelInfo[]> {
      const ctx = Context.current();
      const outcome = await whileHeartbeating(ctx, run.api().listModels(ctx.cancellationSignal));
      switch (outcome.kind) {
        case 'models':
          return outcome.models;
        case 'ambiguous':
        case 'notSent':
        case 'malformed':
          throw toApplicationFailure(outcome, backoffMs(run, ctx.info.attempt));
        case 'rateLimited':
        case 'batchStop':
        case 'config':
        case 'notFound':
        case 'refunded':
        case 'rejected':
        case 'inFlight':
          throw toApplicationFailure(outcome);
        case 'accepted':
        case 'ended':
          throw toApplicationFailure({
            kind: 'malformed',
            lastError: `unexpected ${outcome.kind} answer to GET models`,
          });
      }
    },
  };
}

/** `poll` with each inline image's data replaced by a short description (activity results go into history). */
function withoutInlineData(poll: PollCreationResult): PollCreationResult {
  if (poll.outcome !== 'succeeded') return poll;
  return {
    ...poll,
    images: poll.images.map((image) => ({
      ...image,
      url: describeImageUrl(image.url, image.source),
      ...(image.source === undefined ? {} : { source: clipSource(image.source) }),
    })),
  };
}
