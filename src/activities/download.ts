import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { request, type Dispatcher } from 'undici';
import { retryAfterOr } from '../api/retry-after';
import {
  FailureType,
  type DownloadedImage,
  type DownloadFailedDetails,
  type DownloadImagesInput,
  type ImageRef,
} from '../model';
import {
  AddressPolicy,
  DOWNLOAD_ALLOW_HOSTS_ENV,
  createGuardedDownloadDispatcher,
  parseAllowList,
  refusalOf,
} from '../api/download-guard';
import { ConfigError, type ServiceConfig } from '../config/service-config';
import { abandon, declaredLength, describeError, requestTimeoutOf, startDeadline, type Deadline } from '../api/http';
import { SNIFF_BYTES, sniffImageType } from '../api/image-type';
import { MAX_IMAGE_URL_LENGTH } from '../api/schemas';
import { CandidateTally } from './candidates';
import { clipText, decodeDataUri, MAX_MEDIA_TYPE_LENGTH } from './data-uri';

export { decodeDataUri };

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
 * the Content-Type or the URL), follow a URL longer than {@link MAX_IMAGE_URL_LENGTH}, or write more than
 * `maxTotalBytes` for one creation.
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

export interface DownloadOptions {
  dispatcher: Dispatcher;
  /** Folder that relative `outDir`s are resolved against. */
  outputRoot: string;
  /** Largest image; a larger one (declared or streamed) fails the download, non-retryably. */
  maxBytes: number;
  /**
   * Largest total of one call's images (a creation's byte budget), images already saved included; going past it
   * fails the download, non-retryably.
   * @default no limit besides `maxBytes` per image
   */
  maxTotalBytes?: number;
  maxRedirects: number;
  headersTimeoutMs: number;
  /** Longest silence between two chunks of a body. */
  bodyTimeoutMs: number;
  /**
   * Total time for one image: every redirect and the whole body. Running out is a retryable failure.
   * @default requestTimeoutOf(dispatcher): the configured `requestTimeoutMs` for a dispatcher made by
   * `createDownloadDispatcher`, else 60000
   */
  requestTimeoutMs?: number;
  defaultRetryAfterMs: number;
  now: () => number;
  /** Called while streaming, at most every 256 KiB (the activity heartbeats). */
  progress?: (p: { index: number; bytes: number }) => void;
  signal?: AbortSignal;
}

interface Sidecar {
  url: string;
  file: string;
  sha256: string;
  bytes: number;
}

/** The extensions a saved image may have: one per type recognised by {@link sniffImageType}. */
const IMAGE_EXTENSIONS: ReadonlySet<string> = new Set(['png', 'jpg', 'gif', 'webp', 'avif']);
const PROGRESS_EVERY = 256 * 1024;

/** Downloads every image of a creation; see the module comment. */
export async function downloadImages(input: DownloadImagesInput, options: DownloadOptions): Promise<DownloadedImage[]> {
  const batchDir = path.resolve(options.outputRoot, input.outDir);
  const rowSegment = safeSegment(input.rowId, 'rowId');
  const rowDir = path.join(batchDir, rowSegment);
  await mkdir(rowDir, { recursive: true });
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

/** The longest `source` (a path in the record) kept in a result. */
const MAX_SOURCE_LENGTH = 200;

/** Whether an image's URL is an inline image (`data:...`), saved from the poll's own bytes rather than fetched. */
export function isDataUri(url: string): boolean {
  return /^data:/i.test(url);
}

/**
 * What may stand for an image's URL in anything that leaves the activity (results and failures go into Temporal
 * history, the ledger and the results files): an http(s) URL as it is, a data: URI as its declared type, its size
 * and where it was found, never its data: `data:image/png;base64 (12345 bytes) at data[0].b64_json`. The size is
 * `bytes` when known, else the length of its data in characters.
 */
export function describeImageUrl(url: string, source?: string, bytes?: number): string {
  if (!isDataUri(url)) return url;
  const comma = url.indexOf(',');
  const header = comma < 0 ? 'data:(no comma)' : clipText(url.slice(0, comma), MAX_MEDIA_TYPE_LENGTH + 5);
  const size = bytes !== undefined ? `${bytes} bytes` : `${comma < 0 ? url.length : url.length - comma - 1} characters`;
  return `${header} (${size})${source === undefined ? '' : ` at ${clipText(source, MAX_SOURCE_LENGTH)}`}`;
}

/** Where a record held an image, bounded for results (a hostile record's field names may be long). */
export function clipSource(source: string): string {
  return clipText(source, MAX_SOURCE_LENGTH);
}

/** Saves an inline image (a data: URI): decoded here, no request; the same checks, names and sidecar as a download. */
async function saveInline(
  image: ImageRef,
  index: number,
  rowDir: string,
  base: string,
  options: DownloadOptions,
  budget: number | undefined,
): Promise<Sidecar> {
  const label = describeImageUrl(image.url, image.source);
  let tooLarge = false;
  const fail = (reason: string) => {
    const details: DownloadFailedDetails = { url: label, index, reason, ...(tooLarge ? { tooLarge } : {}) };
    return ApplicationFailure.create({
      type: FailureType.DownloadFailed,
      message: `image ${index} (${label}): ${reason}`,
      nonRetryable: true,
      details: [details],
    });
  };
  const decoded = decodeDataUri(image.url, (size) => {
    const over = overLimit(size, `image of ${size} bytes`, options, budget);
    tooLarge = over !== undefined;
    return over;
  });
  if ('refused' in decoded) throw fail(decoded.refused);
  const { bytes, mediaType } = decoded;
  const ext = sniffImageType(bytes.subarray(0, SNIFF_BYTES), true);
  if (!ext) {
    throw fail(
      `not an image: its first bytes are none of PNG, JPEG, GIF, WebP or AVIF (${JSON.stringify(
        bytes.subarray(0, 16).toString('latin1'),
      )}; declared type ${JSON.stringify(mediaType)} ignored)`,
    );
  }
  const sidecar: Sidecar = {
    url: describeImageUrl(image.url, image.source, bytes.length),
    file: `${base}.${ext}`,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    bytes: bytes.length,
  };
  const tempPath = path.join(rowDir, `.${base}.${randomUUID()}.part`);
  try {
    const fh = await open(tempPath, 'w');
    try {
      await fh.writeFile(bytes);
    } finally {
      await fh.close();
    }
    await rename(tempPath, path.join(rowDir, sidecar.file));
    await writeSidecar(rowDir, base, sidecar);
    return sidecar;
  } finally {
    await rm(tempPath, { force: true });
  }
}

/** Why `size` bytes of an image are too many (over the image limit, or the creation's budget left), if they are. */
function overLimit(size: number, prefix: string, options: DownloadOptions, budget: number | undefined) {
  if (size > options.maxBytes) return `${prefix} exceeds the limit of ${options.maxBytes} bytes`;
  if (budget !== undefined && size > budget) {
    return `${prefix} exceeds what is left (${budget} bytes) of the creation's budget of ${options.maxTotalBytes} bytes (num_images × IMAGEGEN_MAX_DOWNLOAD_BYTES)`;
  }
  return undefined;
}

/** Writes `<base>.json`, the sidecar of a saved image, atomically (a temporary file renamed into place). */
async function writeSidecar(rowDir: string, base: string, sidecar: Sidecar): Promise<void> {
  const sidecarTemp = path.join(rowDir, `.${base}.${randomUUID()}.json.part`);
  const sfh = await open(sidecarTemp, 'w');
  try {
    await sfh.writeFile(`${JSON.stringify(sidecar)}\n`);
  } finally {
    await sfh.close();
  }
  await rename(sidecarTemp, path.join(rowDir, `${base}.json`));
}

/** The sidecar of a finished download, if it and the file it names agree (size and SHA-256). */
async function completed(rowDir: string, base: string): Promise<Sidecar | undefined> {
  let sidecar: Sidecar;
  try {
    sidecar = JSON.parse(await readFile(path.join(rowDir, `${base}.json`), 'utf8')) as Sidecar;
  } catch {
    return undefined;
  }
  // Keyed by creation and index, not by URL: signed URLs may change from one poll to the next.
  if (typeof sidecar.file !== 'string' || path.basename(sidecar.file) !== sidecar.file) {
    return undefined;
  }
  // A file saved before types came from the bytes (named after a Content-Type) is downloaded and judged again.
  if (!IMAGE_EXTENSIONS.has(path.extname(sidecar.file).slice(1))) return undefined;
  const file = path.join(rowDir, sidecar.file);
  try {
    if ((await stat(file)).size !== sidecar.bytes) return undefined;
  } catch {
    return undefined;
  }
  return (await sha256File(file)) === sidecar.sha256 ? sidecar : undefined;
}

async function downloadOne(
  image: ImageRef,
  index: number,
  rowDir: string,
  base: string,
  options: DownloadOptions,
  budget: number | undefined,
): Promise<Sidecar> {
  const deadline = startDeadline(options.requestTimeoutMs ?? requestTimeoutOf(options.dispatcher), options.signal);
  try {
    return await fetchTo(image, index, rowDir, base, options, deadline, budget);
  } finally {
    deadline.clear();
  }
}

async function fetchTo(
  image: ImageRef,
  index: number,
  rowDir: string,
  base: string,
  options: DownloadOptions,
  deadline: Deadline,
  budget: number | undefined,
): Promise<Sidecar> {
  const fail = (
    reason: string,
    retryable: boolean,
    extra: { httpStatus?: number; retryAfterMs?: number; tooLarge?: true } = {},
  ) => {
    const details: DownloadFailedDetails = {
      url: image.url,
      index,
      reason,
      ...(extra.httpStatus === undefined ? {} : { httpStatus: extra.httpStatus }),
      ...(extra.tooLarge ? { tooLarge: true } : {}),
    };
    return ApplicationFailure.create({
      type: FailureType.DownloadFailed,
      message: `image ${index} (${image.url}): ${reason}`,
      nonRetryable: !retryable,
      ...(extra.retryAfterMs === undefined ? {} : { nextRetryDelay: Math.max(1, extra.retryAfterMs) }),
      details: [details],
    });
  };

  let url = image.url;
  let res: Dispatcher.ResponseData | undefined;
  for (let hop = 0; ; hop += 1) {
    if (url.length > MAX_IMAGE_URL_LENGTH) {
      throw fail(`URL${hop > 0 ? ' (after a redirect)' : ''} longer than ${MAX_IMAGE_URL_LENGTH} characters`, false);
    }
    if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) throw fail(`not an http(s) URL`, false);
    try {
      res = await request(url, {
        dispatcher: options.dispatcher,
        method: 'GET',
        // Bare headers only: never the API key, never a cookie, on the first hop and on every redirect.
        headers: { accept: 'image/*', 'user-agent': 'imagebatch' },
        headersTimeout: options.headersTimeoutMs,
        bodyTimeout: options.bodyTimeoutMs,
        signal: deadline.signal,
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      const refused = refusalOf(err);
      if (refused) throw fail(hop > 0 ? `redirected to ${url}: ${refused.message}` : refused.message, false);
      throw fail(describeError(deadline.expired ? deadline.error : err), true);
    }
    const location = header(res.headers, 'location');
    if (res.statusCode >= 300 && res.statusCode < 400 && location !== undefined) {
      await discard(res);
      if (hop >= options.maxRedirects) throw fail(`more than ${options.maxRedirects} redirects`, false);
      if (location.length > MAX_IMAGE_URL_LENGTH || !URL.canParse(location, url)) {
        throw fail(`redirected to a location that is not a URL of at most ${MAX_IMAGE_URL_LENGTH} characters`, false);
      }
      url = new URL(location, url).toString();
      continue;
    }
    break;
  }

  const status = res.statusCode;
  if (status !== 200) {
    await discard(res);
    const retryable = status === 429 || status === 408 || status >= 500;
    const retryAfterMs =
      status === 429 || status === 503
        ? retryAfterOr(header(res.headers, 'retry-after'), options.now(), options.defaultRetryAfterMs)
        : undefined;
    throw fail(`HTTP ${status}`, retryable, {
      httpStatus: status,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    });
  }
  // The Content-Type is not looked at: the bytes say what the file is (see sniffImageType).
  const declared = declaredLength(res.headers);
  const tooBig =
    declared === undefined ? undefined : overLimit(declared, `image of ${declared} bytes`, options, budget);
  if (tooBig) {
    abandon(res.body);
    throw fail(tooBig, false, { httpStatus: status, tooLarge: true });
  }

  let ext: string | undefined;
  const head: Buffer[] = [];
  let headBytes = 0;
  const notAnImage = () =>
    fail(
      `not an image: its first bytes are none of PNG, JPEG, GIF, WebP or AVIF (${JSON.stringify(
        Buffer.concat(head).subarray(0, 16).toString('latin1'),
      )}; content type ${JSON.stringify(header(res.headers, 'content-type') ?? '(none)')} ignored)`,
      false,
      { httpStatus: status },
    );
  const tempPath = path.join(rowDir, `.${base}.${randomUUID()}.part`);
  const hash = createHash('sha256');
  let bytes = 0;
  let reported = 0;
  const fh = await open(tempPath, 'w');
  try {
    try {
      for await (const chunk of res.body) {
        const buf = chunk as Buffer;
        bytes += buf.length;
        const over = overLimit(bytes, 'image', options, budget);
        if (over) {
          abandon(res.body);
          throw fail(over, false, { httpStatus: status, tooLarge: true });
        }
        if (ext === undefined) {
          if (headBytes < SNIFF_BYTES) {
            head.push(buf.subarray(0, SNIFF_BYTES - headBytes));
            headBytes += Math.min(buf.length, SNIFF_BYTES - headBytes);
          }
          const sniffed = sniffImageType(Buffer.concat(head), false);
          if (sniffed === null || (sniffed === undefined && headBytes >= SNIFF_BYTES)) {
            abandon(res.body);
            throw notAnImage();
          }
          ext = sniffed;
        }
        hash.update(buf);
        await fh.write(buf);
        if (bytes - reported >= PROGRESS_EVERY) {
          reported = bytes;
          options.progress?.({ index, bytes });
        }
      }
    } catch (err) {
      if (err instanceof ApplicationFailure || options.signal?.aborted) throw err;
      const why = describeError(deadline.expired ? deadline.error : err);
      throw fail(`download interrupted: ${why}`, true, { httpStatus: status });
    } finally {
      await fh.close();
    }
    ext ??= sniffImageType(Buffer.concat(head), true) ?? undefined;
    if (ext === undefined) throw notAnImage();
    const file = `${base}.${ext}`;
    const finalPath = path.join(rowDir, file);
    const sidecar: Sidecar = { url: image.url, file, sha256: hash.digest('hex'), bytes };
    await rename(tempPath, finalPath);
    await writeSidecar(rowDir, base, sidecar);
    return sidecar;
  } finally {
    await rm(tempPath, { force: true });
  }
}

export { sniffImageType };

/** A name usable as one path segment: letters, digits, `.`, `_`, `-` kept; anything else becomes `_`. */
export function safeSegment(value: string, what: string): string {
  const s = value.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200);
  if (s === '' || s === '.' || s === '..') {
    throw ApplicationFailure.create({
      type: FailureType.Config,
      message: `${what} ${JSON.stringify(value)} cannot be used as a file name`,
      nonRetryable: true,
    });
  }
  return s;
}

/**
 * Reads and drops a body that is not wanted (an error page, a redirect), so the connection can be reused; a body
 * that fails or runs past the deadline meanwhile only loses the connection.
 */
async function discard(res: Dispatcher.ResponseData): Promise<void> {
  await res.body.dump().catch(() => undefined);
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
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
