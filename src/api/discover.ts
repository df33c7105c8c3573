import type { ImageRef } from '../model';
import {
  base64Image,
  boundedUrl,
  DEFAULT_MAX_INLINE_IMAGE_BYTES,
  isPlainObject,
  sizeOf,
  sniffedDataUri,
} from './inline-image';
import { childLocation } from './record-path';

/**
 * Discovery: the images of a succeeded creation whose configured image paths (`IMAGEGEN_IMAGE_FIELDS`) found none,
 * looked for by what a value is, never by the name of its field. Every http(s) URL in the record is a candidate: the
 * download (`src/activities/download.ts`) fetches it through the same guard and keeps it only when its bytes are an
 * image, dropping an API link, a webhook or a web page. An inline image (a `data:` URI or base64 text) is taken when
 * its first bytes are an image's. What a record echoes of the request is not searched. `IMAGEGEN_IMAGE_DISCOVERY=off`
 * turns it off.
 */

/** Appended to the `source` of an image the configured paths did not find, but {@link discoverImages} did. */
export const DISCOVERED_SOURCE_SUFFIX = ' (discovered)';

/** The most images (candidates included) kept from one creation record: see `src/activities/image-limits.ts`. */
export const MAX_LISTED_IMAGES = 16;

/**
 * Fields not searched: what a record echoes of the request (an input image of an image-to-image model is not a
 * result). Compared lower case, without `_` and `-`.
 */
const SKIPPED_KEYS: ReadonlySet<string> = new Set(['input', 'inputs', 'request', 'params', 'parameters']);

/** How deep {@link discoverImages} looks (the record is depth 0), and how many values it looks at, at most. */
export const DiscoveryLimit = { depth: 8, values: 10_000 } as const;

/** An http(s) URL and nothing else (no white space anywhere): a candidate. */
const WHOLE_HTTP_URL = /^https?:\/\/\S+$/i;

const normalKey = (key: string) => key.toLowerCase().replace(/[_-]/g, '');

/**
 * Images anywhere in `record`, in document order, looking at most {@link DiscoveryLimit}.depth levels deep and at
 * {@link DiscoveryLimit}.values values, keeping at most {@link MAX_LISTED_IMAGES}: every string that is an http(s)
 * URL, under any field name, as a candidate (`candidate: true`, judged by its bytes when downloaded); a `data:` URI or
 * base64 text whose first bytes are a known image's, under any field name. What a record echoes of the request
 * (`input`, `request`, `params`...) is not searched. Each image's `source` says where it was found and ends with
 * {@link DISCOVERED_SOURCE_SUFFIX}; its `width` and `height` are those of the object holding it.
 */
export function discoverImages(record: unknown, maxInlineBytes = DEFAULT_MAX_INLINE_IMAGE_BYTES): ImageRef[] {
  const out: ImageRef[] = [];
  let looked = 0;
  const full = () => out.length >= MAX_LISTED_IMAGES || looked >= DiscoveryLimit.values;
  const visit = (value: unknown, at: string, holder: object | undefined, depth: number): void => {
    looked++;
    if (typeof value === 'string') {
      const image = discoveredImage(value, maxInlineBytes);
      if (image) out.push({ ...image, ...sizeOf(holder), source: `${at}${DISCOVERED_SOURCE_SUFFIX}` });
      return;
    }
    if (value === null || typeof value !== 'object' || depth >= DiscoveryLimit.depth) return;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && !full(); i++) visit(value[i], childLocation(at, i), undefined, depth + 1);
      return;
    }
    for (const name of Object.keys(value)) {
      if (full()) return;
      if (SKIPPED_KEYS.has(normalKey(name))) continue;
      visit((value as Record<string, unknown>)[name], childLocation(at, name), value, depth + 1);
    }
  };
  if (isPlainObject(record)) visit(record, '', undefined, 0);
  return out;
}

/** What a string found by discovery is: a candidate URL, an inline image, or nothing. */
function discoveredImage(value: string, maxInlineBytes: number): { url: string; candidate?: true } | undefined {
  if (WHOLE_HTTP_URL.test(value)) return { url: boundedUrl(value), candidate: true };
  // An inline image's bytes are here: it is judged now by its first bytes, whatever type a data: URI declares.
  const inline = sniffedDataUri(value, maxInlineBytes) ?? base64Image(value, maxInlineBytes);
  return inline === undefined ? undefined : { url: inline };
}
