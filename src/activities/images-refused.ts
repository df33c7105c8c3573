import { ApplicationFailure } from '@temporalio/common';
import { BatchStopReason, FailureType, type BatchStopDetails } from '../model';
import { imagesRefusedFailure } from './failures';

/**
 * A paid success whose images were refused here for a reason that would refuse the next row's too is a stop of the
 * batch, not the row's end: no image found in the record, too many listed, a type refused, a URL the download guard
 * refuses. Each is our own refusal (no answer of an image host, or a 200 whose bytes we refused); a host's own error
 * status (an expired URL's 404 or 410) is not, nor a size over the limit (another row's image may fit): those end the
 * row `images_unsaved` as before.
 *
 * The row keeps its key and its creation. The batch pauses at once (so no other row pays for the same refusal), and
 * after the setting is changed on the worker, `resume` fetches the same creation again: nothing is submitted.
 */
export function imagesRefusedStop(err: unknown, batchId: string): ApplicationFailure | undefined {
  if (!(err instanceof ApplicationFailure) || err.type !== FailureType.DownloadFailed || !err.nonRetryable) {
    return undefined;
  }
  const details = err.details?.[0];
  const { httpStatus, tooLarge } =
    typeof details === 'object' && details !== null ? (details as { httpStatus?: unknown; tooLarge?: unknown }) : {};
  if ((httpStatus !== undefined && httpStatus !== 200) || tooLarge === true) return undefined;
  const stop: BatchStopDetails = {
    reason: BatchStopReason.ImagesRefused,
    httpStatus: 0,
    message:
      `a paid creation's images were refused here, as every row's would be: ${err.message}. Change the setting ` +
      `this names on the worker and restart it, then \`imagebatch resume ${batchId}\`: the row fetches its ` +
      'creation again and nothing is submitted',
  };
  return imagesRefusedFailure(stop);
}
