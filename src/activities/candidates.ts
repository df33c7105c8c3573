import { ApplicationFailure } from '@temporalio/common';
import { FailureType, type ImageRef } from '../model';
import { downloadFailed } from './failures';

/**
 * Candidates: images that discovery found (`src/api/discover.ts`) rather than a configured image path. Any URL of the
 * record is one, so some are no image (an API link, a webhook, a web page): each is fetched through the same guard and
 * limits as any image, and a candidate whose download fails is dropped instead of failing the row. Only when no
 * candidate was kept does the download fail: for now (retryable) when one of them failed for now (a 503, a timeout),
 * else for good, naming why each was dropped.
 */

/** The longest reason kept per dropped candidate in the failure's message. */
const MAX_REASON_CHARS = 160;

export class CandidateTally {
  private readonly dropped: string[] = [];
  private retry: ApplicationFailure | undefined;
  private kept = 0;
  private tried = 0;
  /** The latest status with which a host refused a candidate; undefined once any candidate was refused here. */
  private hostStatus: number | undefined;
  private refusedHere = false;

  /** The download of `image` (a candidate or not) as `work` does it; a candidate's failure is noted, not thrown. */
  async attempt<T>(image: ImageRef, work: () => Promise<T>, signal?: AbortSignal): Promise<T | undefined> {
    if (image.candidate !== true) return work();
    this.tried++;
    try {
      const got = await work();
      this.kept++;
      return got;
    } catch (err) {
      if (!(err instanceof ApplicationFailure) || err.type !== FailureType.DownloadFailed || signal?.aborted) throw err;
      // The first detail of a download's failure is its DownloadFailedDetails: its reason, without the URL.
      const first: unknown = err.details?.[0];
      const told = first !== null && typeof first === 'object' && 'reason' in first ? first.reason : undefined;
      const reason = (typeof told === 'string' ? told : err.message).slice(0, MAX_REASON_CHARS);
      this.dropped.push(`${image.source ?? image.url}: ${reason}`);
      if (!err.nonRetryable) this.retry ??= err;
      const status =
        first !== null && typeof first === 'object' && 'httpStatus' in first ? first.httpStatus : undefined;
      if (typeof status === 'number' && status !== 200) this.hostStatus = status;
      else this.refusedHere = true;
      return undefined;
    }
  }

  /** A candidate saved by an earlier attempt (its file and sidecar agree). */
  keptBefore(image: ImageRef): void {
    if (image.candidate !== true) return;
    this.tried++;
    this.kept++;
  }

  /** After the last image: throws when there were candidates and none was kept. */
  finish(creationId: string): void {
    if (this.tried === 0 || this.kept > 0) return;
    if (this.retry) throw this.retry;
    const which =
      this.tried === 1
        ? 'the one URL found in the record is not'
        : `none of the ${this.tried} URLs found in the record is`;
    // Every candidate refused by its host (an expired link's 404): the host's status, so the row ends
    // images_unsaved; one refused here (not an image, the guard) would be refused again: a stop (images-refused.ts).
    throw downloadFailed(`${which} an image (creation ${creationId}): ${this.dropped.join('; ')}`, {
      reason: 'no candidate is an image',
      dropped: this.dropped,
      ...(this.refusedHere || this.hostStatus === undefined ? {} : { httpStatus: this.hostStatus }),
    });
  }
}
