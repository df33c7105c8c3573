import type { ApplicationFailure } from '@temporalio/common';
import { imagesAskedFor, type ImageRef } from '../model';
import { MAX_LISTED_IMAGES } from '../api/schemas';
import { downloadFailed } from './failures';

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

/**
 * Throws a non-retryable DownloadFailed when a creation lists more images than `numImages` allows. Candidates (URLs
 * discovery found, many of them no image) are not counted: they are bounded by `MAX_LISTED_IMAGES` and the byte budget.
 */
export function checkImageCount(creationId: string, all: readonly ImageRef[], numImages: unknown): void {
  const images = all.filter((image) => image.candidate !== true);
  const asked = imagesAskedFor(numImages);
  const limit = asked + EXTRA_IMAGES_ALLOWED;
  if (images.length <= limit) return;
  const listed = images.length >= MAX_LISTED_IMAGES ? `at least ${images.length}` : String(images.length);
  throw downloadFailed(
    `creation ${creationId} lists ${listed} images for num_images=${asked} (at most ${limit} are accepted): ` +
      `none was downloaded`,
    { reason: 'too many images', listed: images.length, limit },
  );
}

/** The byte budget of one creation's images. */
export function creationByteBudget(numImages: unknown, maxDownloadBytes: number): number {
  return imagesAskedFor(numImages) * maxDownloadBytes;
}

/** Entries of `IMAGEGEN_IMAGE_FIELDS` named in a message at most. */
const FIELDS_NAMED = 12;

/**
 * The failure of a creation whose status says success but whose record shows no image: a non-retryable DownloadFailed
 * (the row ends `images_unsaved`, paid and not saved; never `succeeded` with nothing on disk). The message names the
 * record's top-level field names, never their values, and the setting to change. The activity makes it a stop of the
 * batch (images-refused.ts): after the setting, `resume` fetches the same creation again, submitting nothing.
 */
export function noImageFailure(input: {
  creationId: string;
  status: string;
  /** The record's top-level field names (`PollCreationResult.recordKeys`); undefined when the poll did not say. */
  recordKeys: readonly string[] | undefined;
  /** `IMAGEGEN_IMAGE_FIELDS` as configured. */
  imageFields: readonly string[];
}): ApplicationFailure {
  const { creationId, recordKeys, imageFields } = input;
  const shown = imageFields.slice(0, FIELDS_NAMED).join(', ');
  const more = imageFields.length > FIELDS_NAMED ? `, and ${imageFields.length - FIELDS_NAMED} more` : '';
  const keys =
    recordKeys === undefined
      ? 'its top-level fields were not reported'
      : recordKeys.length === 0
        ? 'it has no top-level field'
        : `its top-level fields are ${recordKeys.join(', ')}`;
  return downloadFailed(
    `the record of creation ${creationId} (status ${JSON.stringify(input.status)}) shows no image, neither at ` +
      `IMAGEGEN_IMAGE_FIELDS (${shown}${more}) nor anywhere else it was searched; ${keys}. It was paid: set ` +
      'IMAGEGEN_IMAGE_FIELDS to where this service puts its images (a path such as result.files[].href)',
    { reason: 'no image', recordKeys: recordKeys ?? null, imageFields: imageFields.slice(0, FIELDS_NAMED) },
  );
}
