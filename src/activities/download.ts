import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { request, type Dispatcher } from 'undici';
import { retryAfterOr } from '../api/retry-after';
import { FailureType, type DownloadFailedDetails } from '../api/failure-types';
import { abandon, declaredLength, describeError, requestTimeoutOf, startDeadline, type Deadline } from '../api/http';
import type { DownloadedImage, DownloadImagesInput, ImageRef } from './types';

/**
 * Image downloads: streamed to a temporary file beside the final one, hashed while streaming, then renamed
 * into place, with a sidecar `<name>.json` recording the checksum. An image whose sidecar and file agree is
 * not downloaded again. Requests carry no API key and no credentials of any kind; redirects are followed by
 * hand, a bounded number of times, with the same bare headers. Each image has a size limit (declared or actual)
 * and a total deadline covering its redirects and its body.
 */

export interface DownloadOptions {
  dispatcher: Dispatcher;
  /** Folder that relative `outDir`s are resolved against. */
  outputRoot: string;
  /** Largest image; a larger one (declared or streamed) fails the download, non-retryably. */
  maxBytes: number;
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

const EXT_OF: Readonly<Record<string, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/jpg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/avif': 'avif',
  'image/bmp': 'bmp',
  'image/tiff': 'tiff',
};
const PROGRESS_EVERY = 256 * 1024;

/** Downloads every image of a creation; see the module comment. */
export async function downloadImages(input: DownloadImagesInput, options: DownloadOptions): Promise<DownloadedImage[]> {
  const batchDir = path.resolve(options.outputRoot, input.outDir);
  const rowSegment = safeSegment(input.rowId, 'rowId');
  const rowDir = path.join(batchDir, rowSegment);
  await mkdir(rowDir, { recursive: true });
  const out: DownloadedImage[] = [];
  for (const [index, image] of input.images.entries()) {
    const base = `${safeSegment(input.creationId, 'creationId')}-${index}`;
    const done = await completed(rowDir, base);
    if (done) {
      out.push({ url: image.url, path: `${rowSegment}/${done.file}`, sha256: done.sha256, bytes: done.bytes });
      continue;
    }
    const got = await downloadOne(image, index, rowDir, base, options);
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
): Promise<Sidecar> {
  const deadline = startDeadline(options.requestTimeoutMs ?? requestTimeoutOf(options.dispatcher), options.signal);
  try {
    return await fetchTo(image, index, rowDir, base, options, deadline);
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
      throw fail(describeError(deadline.expired ? deadline.error : err), true);
    }
    const location = header(res.headers, 'location');
    if (res.statusCode >= 300 && res.statusCode < 400 && location !== undefined) {
      await discard(res);
      if (hop >= options.maxRedirects) throw fail(`more than ${options.maxRedirects} redirects`, false);
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
  const contentType = (header(res.headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (!contentType.startsWith('image/')) {
    await discard(res);
    throw fail(`content type ${JSON.stringify(contentType || '(none)')} is not an image`, false, {
      httpStatus: status,
    });
  }
  const declared = declaredLength(res.headers);
  if (declared !== undefined && declared > options.maxBytes) {
    abandon(res.body);
    throw fail(`image of ${declared} bytes exceeds the limit of ${options.maxBytes} bytes`, false, {
      httpStatus: status,
    });
  }

  const ext = EXT_OF[contentType] ?? /^image\/([a-z0-9]{1,8})$/.exec(contentType)?.[1] ?? 'img';
  const file = `${base}.${ext}`;
  const finalPath = path.join(rowDir, file);
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
        if (bytes > options.maxBytes) {
          abandon(res.body);
          throw fail(`image exceeds the limit of ${options.maxBytes} bytes`, false, { httpStatus: status });
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
