import type { ImageRef, StatusCheck } from '../model';
import { IMAGE_MEDIA_TYPES } from './image-type';
import { HTTP_URL, sniffedDataUri } from './inline-image';

/**
 * A status in none of the worker's sets (success, failed, in flight) is waited out like one in flight, unless its
 * record holds an image, judged by its bytes, or something at a configured image path (`IMAGEGEN_IMAGE_FIELDS`): then
 * what the word means is for a person to say, and the batch stops (`unrecognised_status`, batch-stops.ts). An inline
 * image is judged here, by its first bytes. A URL is judged by the activity, which fetches its first bytes through the
 * download guard (src/activities/create-image/status-check.ts), and by doctor's paid test: never here, which stays pure.
 */

/** URLs of one record judged at most, in the order found. */
export const MAX_JUDGED_URLS = 8;
/** Characters of a location kept (where an image sat in the record). */
const MAX_AT_CHARS = 200;

/** A record whose status is in no set, with URLs still to judge, or something at a configured image path. */
export interface UnjudgedRecord {
  /** Its http(s) URLs where an image may be (at the image paths, else found by discovery): each with where it sat. */
  urls: { url: string; at: string }[];
  /** Where something sits at a configured image path, if anything does: the batch stops whatever its bytes are. */
  atImagePath?: string;
}

/**
 * What a record whose status is in no set holds, from the images `imagesOf` found in it (`found`): an image already
 * judged by its bytes (an inline one), else URLs to judge (and what sits at an image path), else nothing (undefined).
 */
export function judgeInline(
  found: readonly ImageRef[],
  maxInlineBytes: number,
): { image: NonNullable<StatusCheck['image']> } | { unjudged: UnjudgedRecord } | undefined {
  for (const image of found) {
    const inline = /^data:/i.test(image.url) ? sniffedDataUri(image.url, maxInlineBytes) : undefined;
    const type = inline === undefined ? undefined : /^data:([^;,]+)/.exec(inline)?.[1];
    if (type !== undefined && Object.values(IMAGE_MEDIA_TYPES).includes(type))
      return { image: { at: atOf(image), type } };
  }
  const urls = found
    .filter((image) => HTTP_URL.test(image.url))
    .slice(0, MAX_JUDGED_URLS)
    .map((image) => ({ url: image.url, at: atOf(image) }));
  const configured = found.find((image) => image.candidate !== true);
  if (urls.length === 0 && configured === undefined) return undefined;
  return { unjudged: { urls, ...(configured ? { atImagePath: atOf(configured) } : {}) } };
}

function atOf(image: ImageRef): string {
  return (image.source ?? 'the record').slice(0, MAX_AT_CHARS);
}
