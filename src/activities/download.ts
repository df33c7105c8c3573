import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { request, type Dispatcher } from 'undici';
import { retryAfterOr } from '../api/retry-after';
import { FailureType, type DownloadFailedDetails } from '../api/failure-types';
import { refusalOf } from '../api/download-guard';
import { abandon, declaredLength, describeError, requestTimeoutOf, startDeadline, type Deadline } from '../api/http';
import { MAX_IMAGE_URL_LENGTH } from '../api/schemas';
import type { DownloadedImage, DownloadImagesInput, ImageRef } from './types';

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
/** Bytes looked at to recognise a type (an AVIF file's `ftyp` box lists its brands in its first bytes). */
const SNIFF_BYTES = 64;
const PROGRESS_EVERY = 256 * 1024;

/** Downloads every image of a creation; see the module comment. */
export async function downloadImages(input: DownloadImagesInput, options: DownloadOptions): Promise<DownloadedImage[]> {
  const batchDir = path.resolve(options.outputRoot, input.outDir);
  const rowSegment = safeSegment(input.rowId, 'rowId');
  const rowDir = path.join(batchDir, rowSegment);
  await mkdir(rowDir, { recursive: true });
  const out: DownloadedImage[] = [];
  let total = 0;
  for (const [index, image] of input.images.entries()) {
    const base = `${safeSegment(input.creationId, 'creationId')}-${index}`;
    const done = await completed(rowDir, base);
    if (done) {
      total += done.bytes;
      out.push({ url: image.url, path: `${rowSegment}/${done.file}`, sha256: done.sha256, bytes: done.bytes });
      continue;
    }
    const budget = options.maxTotalBytes === undefined ? undefined : Math.max(0, options.maxTotalBytes - total);
    const got = await downloadOne(image, index, rowDir, base, options, budget);
    total += got.bytes;
    out.push({ url: image.url, path: `${rowSegment}/${got.file}`, sha256: got.sha256, bytes: got.bytes });
  }
  return out;
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
  const fail = (reason: string, retryable: boolean, extra: { httpStatus?: number; retryAfterMs?: number } = {}) => {
    const details: DownloadFailedDetails = {
      url: image.url,
      index,
      reason,
      ...(extra.httpStatus === undefined ? {} : { httpStatus: extra.httpStatus }),
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
  const overLimit = (size: number | undefined, prefix: string) => {
    if (size === undefined) return undefined;
    if (size > options.maxBytes) return `${prefix} exceeds the limit of ${options.maxBytes} bytes`;
    if (budget !== undefined && size > budget) {
      return `${prefix} exceeds what is left (${budget} bytes) of the creation's budget of ${options.maxTotalBytes} bytes (num_images × IMAGEGEN_MAX_DOWNLOAD_BYTES)`;
    }
    return undefined;
  };
  const tooBig = overLimit(declared, `image of ${declared} bytes`);
  if (tooBig) {
    abandon(res.body);
    throw fail(tooBig, false, { httpStatus: status });
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
        const over = overLimit(bytes, 'image');
        if (over) {
          abandon(res.body);
          throw fail(over, false, { httpStatus: status });
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
    const sidecarTemp = path.join(rowDir, `.${base}.${randomUUID()}.json.part`);
    const sfh = await open(sidecarTemp, 'w');
    try {
      await sfh.writeFile(`${JSON.stringify(sidecar)}\n`);
    } finally {
      await sfh.close();
    }
    await rename(sidecarTemp, path.join(rowDir, `${base}.json`));
    return sidecar;
  } finally {
    await rm(tempPath, { force: true });
  }
}

/**
 * The type of an image from its first bytes, as a file extension: `png`, `jpg`, `gif`, `webp` or `avif`. `null`
 * when the bytes are none of them; `undefined` when more bytes could still make them one (and `complete` is false:
 * there are none to come).
 */
export function sniffImageType(head: Buffer, complete: boolean): string | null | undefined {
  const starts = (sig: readonly number[], at = 0) => {
    const have = head.subarray(at, at + sig.length);
    return sig.every((b, i) => i >= have.length || have[i] === b)
      ? have.length >= sig.length
        ? true
        : undefined
      : false;
  };
  const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));
  const checks: (() => string | false | undefined)[] = [
    () => starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) && 'png',
    () => starts([0xff, 0xd8, 0xff]) && 'jpg',
    () => {
      const a = starts(ascii('GIF87a'));
      const b = starts(ascii('GIF89a'));
      return a === true || b === true ? 'gif' : a === undefined || b === undefined ? undefined : false;
    },
    () => {
      const riff = starts(ascii('RIFF'));
      if (riff !== true) return riff;
      return starts(ascii('WEBP'), 8) && 'webp';
    },
    () => {
      // An ISO-BMFF `ftyp` box whose major or compatible brands include avif (still) or avis (sequence).
      const ftyp = starts(ascii('ftyp'), 4);
      if (ftyp !== true) return ftyp;
      const size = head.readUInt32BE(0);
      const end = Math.min(size >= 16 ? size : 16, head.length);
      for (let at = 8; at + 4 <= end; at += 4) {
        if (at === 12) continue; // the minor version
        const brand = head.subarray(at, at + 4).toString('latin1');
        if (brand === 'avif' || brand === 'avis') return 'avif';
      }
      return head.length >= Math.min(size, SNIFF_BYTES) ? false : undefined;
    },
  ];
  let pending = false;
  for (const check of checks) {
    const r = check();
    if (typeof r === 'string') return r;
    if (r === undefined) pending = true;
  }
  return pending && !complete ? undefined : null;
}

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
