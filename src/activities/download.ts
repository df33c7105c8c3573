import path from 'node:path';
import type { Dispatcher } from 'undici';
import type { DownloadedImage, DownloadImagesInput } from '../model';
import {
  AddressPolicy,
  DOWNLOAD_ALLOW_HOSTS_ENV,
  createGuardedDownloadDispatcher,
  parseAllowList,
} from '../api/download-guard';
import { ConfigError } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import { sniffImageType } from '../api/image-type';
import { CandidateTally } from './candidates';
import { clipSource, describeImageUrl, isDataUri } from './data-uri';
import { completed, makeRowFolder, saveInline, type DownloadOptions } from './download-files';
import { downloadOne } from './download-fetch';
import { unusableFileName } from './failures';

/**
 * Image downloads: streamed to a temporary file beside the final one, hashed while streaming, then renamed
 * into place, with a sidecar `<name>.json` recording the checksum. An image whose sidecar and file agree is
 * not downloaded again. Requests carry no API key and no credentials of any kind; redirects are followed by
 * hand, a bounded number of times, with the same bare headers. Each image has a size limit (declared or actual)
 * and a total deadline covering its redirects and its body.
 *
 * What a hostile service cannot make it do: reach a loopback, private or link-local address (the download
 * dispatcher checks each connection, see `src/api/download-guard.ts`; a refusal is final), save anything but an
 * image (the file's type, and its extension, come from its first bytes: PNG, JPEG, GIF, WebP or AVIF; never from
 * the Content-Type or the URL), follow a URL longer than `MAX_IMAGE_URL_LENGTH` (src/api/schemas.ts), or write
 * more than `maxTotalBytes` for one creation.
 *
 * A candidate (an image discovery found, `ImageRef.candidate`) goes through all of this too, but one that fails is
 * dropped rather than failing the call, unless none is kept (see `./candidates.ts`).
 *
 * An inline image (a `data:<type>;base64,...` URI found in the poll's record) is saved the same way with no request:
 * decoded here, its type judged by its first bytes, the same limits, file name, sidecar and checksum. Its data never
 * leaves the activity: its result and any failure describe it (`data:image/png;base64 (12345 bytes) at
 * data[0].b64_json`, see {@link describeImageUrl}). A malformed data URI fails non-retryably, like a body that is not
 * an image: the poll would give the same bytes again.
 */

/** Downloads every image of a creation; see the module comment. */
export async function downloadImages(input: DownloadImagesInput, options: DownloadOptions): Promise<DownloadedImage[]> {
  const batchDir = path.resolve(options.outputRoot, input.outDir);
  const rowSegment = safeSegment(input.rowId, 'rowId');
  const rowDir = path.join(batchDir, rowSegment);
  await makeRowFolder(batchDir, rowDir);
  const out: DownloadedImage[] = [];
  const candidates = new CandidateTally();
  let total = 0;
  for (const [index, image] of input.images.entries()) {
    const base = `${safeSegment(input.creationId, 'creationId')}-${index}`;
    const source = image.source === undefined ? {} : { source: clipSource(image.source) };
    const done = await completed(rowDir, base);
    if (done) {
      candidates.keptBefore(image);
      total += done.bytes;
      const url = describeImageUrl(image.url, image.source, done.bytes);
      out.push({ url, ...source, path: `${rowSegment}/${done.file}`, sha256: done.sha256, bytes: done.bytes });
      continue;
    }
    const budget = options.maxTotalBytes === undefined ? undefined : Math.max(0, options.maxTotalBytes - total);
    const got = await candidates.attempt(
      image,
      () =>
        isDataUri(image.url)
          ? saveInline(image, index, rowDir, base, options, budget)
          : downloadOne(image, index, rowDir, base, options, budget),
      options.signal,
    );
    if (!got) continue; // a candidate that is no image (see candidates.ts)
    total += got.bytes;
    out.push({ url: got.url, ...source, path: `${rowSegment}/${got.file}`, sha256: got.sha256, bytes: got.bytes });
  }
  candidates.finish(input.creationId);
  return out;
}

export { sniffImageType };

/** A name usable as one path segment: letters, digits, `.`, `_`, `-` kept; anything else becomes `_`. */
export function safeSegment(value: string, what: string): string {
  const s = value.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200);
  if (s === '' || s === '.' || s === '..') {
    throw unusableFileName(what, value);
  }
  return s;
}

/** What a download takes from the service's settings: its sizes, redirects and timeouts, as every batch uses them. */
export function downloadSettings(
  config: ServiceConfig,
): Pick<
  DownloadOptions,
  'maxBytes' | 'maxRedirects' | 'headersTimeoutMs' | 'bodyTimeoutMs' | 'requestTimeoutMs' | 'defaultRetryAfterMs'
> {
  return {
    maxBytes: config.maxDownloadBytes,
    maxRedirects: config.downloadMaxRedirects,
    headersTimeoutMs: config.headersTimeoutMs,
    bodyTimeoutMs: config.bodyTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    defaultRetryAfterMs: config.defaultRetryAfterMs,
  };
}

/**
 * The dispatcher images are downloaded through: every connection checked by the address policy (see
 * src/api/download-guard.ts). A wrong allow list is a {@link ConfigError} naming its variable.
 */
export function guardedDownloadDispatcher(config: ServiceConfig, connections = config.httpConnections): Dispatcher {
  const allow = parseAllowList((config.downloadAllowHosts ?? []).join(','));
  if (typeof allow === 'string') throw new ConfigError(DOWNLOAD_ALLOW_HOSTS_ENV, allow);
  return createGuardedDownloadDispatcher({
    policy: new AddressPolicy({ allow, baseUrl: config.baseUrl }),
    connections,
    connectTimeoutMs: config.connectTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
    bodyTimeoutMs: config.bodyTimeoutMs,
  });
}
