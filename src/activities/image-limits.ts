import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../api/failure-types';
import { MAX_LISTED_IMAGES } from '../api/schemas';
import type { ImageRef } from './types';

/**
 * How many images one creation may bring, and how many bytes. The service decides the list of image URLs; a hostile
 * or broken one could list thousands (one 1 MiB poll body held 44,001), each a download and an entry of the
 * activity's result, which Temporal refuses past 2 MiB. A creation may list what it was asked for (`num_images`,
 * default 1) and {@link EXTRA_IMAGES_ALLOWED} more; beyond that its images are refused as a whole (the creation was
 * paid for: the row ends generated but unsaved, with this error). Its images together may weigh at most
 * `num_images` × `IMAGEGEN_MAX_DOWNLOAD_BYTES`.
 */

/** Images accepted beyond the number asked for. */
export const EXTRA_IMAGES_ALLOWED = 2;

/** The number of images asked for: `num_images` when it is a positive whole number, else 1 (the service's default). */
export function imagesAskedFor(numImages: unknown): number {
  return typeof numImages === 'number' && Number.isInteger(numImages) && numImages >= 1 ? numImages : 1;
}

/** Throws a non-retryable DownloadFailed when a creation lists more images than `numImages` allows. */
export function checkImageCount(creationId: string, images: readonly ImageRef[], numImages: unknown): void {
  const asked = imagesAskedFor(numImages);
  const limit = asked + EXTRA_IMAGES_ALLOWED;
  if (images.length <= limit) return;
  const listed = images.length >= MAX_LISTED_IMAGES ? `at least ${images.length}` : String(images.length);
  throw ApplicationFailure.create({
    type: FailureType.DownloadFailed,
    message:
      `creation ${creationId} lists ${listed} images for num_images=${asked} (at most ${limit} are accepted): ` +
      `none was downloaded`,
    nonRetryable: true,
    details: [{ reason: 'too many images', listed: images.length, limit }],
  });
}

/** The byte budget of one creation's images. */
export function creationByteBudget(numImages: unknown, maxDownloadBytes: number): number {
  return imagesAskedFor(numImages) * maxDownloadBytes;
}
