import { createHash, randomUUID } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { request, type Dispatcher } from 'undici';
import { headerOf } from '../api/classify';
import { retryAfterOr } from '../api/retry-after';
import type { DownloadFailedDetails, ImageRef } from '../model';
import { refusalOf } from '../api/download-guard';
import { abandon, declaredLength, describeError, requestTimeoutOf, startDeadline, type Deadline } from '../api/http';
import { IMAGE_MEDIA_TYPES, SNIFF_BYTES, sniffImageType } from '../api/image-type';
import { MAX_IMAGE_URL_LENGTH } from '../api/schemas';
import { overLimit, writeSidecar, type DownloadOptions, type Sidecar } from './download-files';
import { downloadFailed } from './failures';

/** One image fetched over HTTP (see download.ts): its redirects followed by hand, its body streamed and judged. */

const PROGRESS_EVERY = 256 * 1024;

export async function downloadOne(
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

/** The failure of one image's download: retried when `retryable` (after `retryAfterMs`, when a host said it). */
type Fail = (
  reason: string,
  retryable: boolean,
  extra?: { httpStatus?: number; retryAfterMs?: number; tooLarge?: true },
) => ApplicationFailure;

/** Where one image goes: its index in the creation, its row's folder, its file's base name, the budget left. */
interface Target {
  index: number;
  rowDir: string;
  base: string;
  options: DownloadOptions;
  deadline: Deadline;
  budget: number | undefined;
  fail: Fail;
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
  const fail: Fail = (reason, retryable, extra = {}) => {
    const details: DownloadFailedDetails = {
      url: image.url,
      index,
      reason,
      ...(extra.httpStatus === undefined ? {} : { httpStatus: extra.httpStatus }),
      ...(extra.tooLarge ? { tooLarge: true } : {}),
    };
    const retry = extra.retryAfterMs === undefined ? {} : { retryAfterMs: extra.retryAfterMs };
    return downloadFailed(`image ${index} (${image.url}): ${reason}`, details, retryable ? retry : undefined);
  };
  const target: Target = { index, rowDir, base, options, deadline, budget, fail };
  const res = await followRedirects(image.url, target);
  await refuseAnswer(res, target);
  return streamToFile(image, res, target);
}

/** GETs `first`, following its redirects by hand (bare headers on every hop): the answer that is no redirect. */
async function followRedirects(first: string, target: Target): Promise<Dispatcher.ResponseData> {
  const { options, deadline, fail } = target;
  let url = first;
  for (let hop = 0; ; hop += 1) {
    if (url.length > MAX_IMAGE_URL_LENGTH) {
      throw fail(`URL${hop > 0 ? ' (after a redirect)' : ''} longer than ${MAX_IMAGE_URL_LENGTH} characters`, false);
    }
    if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) throw fail(`not an http(s) URL`, false);
    let res: Dispatcher.ResponseData;
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
    const location = headerOf(res.headers, 'location');
    if (res.statusCode < 300 || res.statusCode >= 400 || location === undefined) return res;
    await discard(res);
    if (hop >= options.maxRedirects) throw fail(`more than ${options.maxRedirects} redirects`, false);
    if (location.length > MAX_IMAGE_URL_LENGTH || !URL.canParse(location, url)) {
      throw fail(`redirected to a location that is not a URL of at most ${MAX_IMAGE_URL_LENGTH} characters`, false);
    }
    url = new URL(location, url).toString();
  }
}

/** Throws when the answer is no 200, or declares more bytes than the limits allow. */
async function refuseAnswer(res: Dispatcher.ResponseData, target: Target): Promise<void> {
  const { options, budget, fail } = target;
  const status = res.statusCode;
  if (status !== 200) {
    await discard(res);
    const retryable = status === 429 || status === 408 || status >= 500;
    const retryAfterMs =
      status === 429 || status === 503
        ? retryAfterOr(headerOf(res.headers, 'retry-after'), options.now(), options.defaultRetryAfterMs)
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
}

/**
 * Streams a 200's body to a temporary file, hashed and judged by its first bytes on the way, then renames it into
 * place beside its sidecar.
 */
async function streamToFile(image: ImageRef, res: Dispatcher.ResponseData, target: Target): Promise<Sidecar> {
  const { index, rowDir, base, options, deadline, budget, fail } = target;
  const status = res.statusCode;
  let ext: string | undefined;
  const head: Buffer[] = [];
  let headBytes = 0;
  const notAnImage = () =>
    fail(
      `not an image: its first bytes are none of PNG, JPEG, GIF, WebP or AVIF (${JSON.stringify(
        Buffer.concat(head).subarray(0, 16).toString('latin1'),
      )}; content type ${JSON.stringify(headerOf(res.headers, 'content-type') ?? '(none)')} ignored)`,
      false,
      { httpStatus: status },
    );
  const tempPath = path.join(rowDir, `.${base}.${randomUUID()}.part`);
  const hash = createHash('sha256');
  let bytes = 0;
  let reported = 0;
  const fh = await open(tempPath, 'wx');
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

const TRANSIENT = { transient: true } as const;

/**
 * Whether `url` serves an image, judged by its first bytes as a download judges them: fetched the same way (bare
 * headers, never the API key; the guard; redirects by hand), its body read no further than a chunk holding those
 * bytes, nothing saved. Its media type, or why it is none: `transient` when no answer came (a reset, a timeout, a
 * 429, 408 or 5xx), so another try may tell.
 */
export async function sniffImageAt(
  url: string,
  options: DownloadOptions,
): Promise<{ type: string } | { why: string; transient?: true }> {
  const deadline = startDeadline(options.requestTimeoutMs ?? requestTimeoutOf(options.dispatcher), options.signal);
  const fail: Fail = (reason, retryable) =>
    downloadFailed(reason, { url, index: 0, reason }, retryable ? {} : undefined);
  try {
    const target: Target = { index: 0, rowDir: '', base: '', options, deadline, budget: undefined, fail };
    const res = await followRedirects(url, target);
    if (res.statusCode !== 200) {
      await discard(res);
      const status = res.statusCode;
      return { why: `HTTP ${status}`, ...(status === 429 || status === 408 || status >= 500 ? TRANSIENT : {}) };
    }
    const head: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of res.body) {
      head.push(chunk as Buffer);
      bytes += (chunk as Buffer).length;
      if (bytes >= SNIFF_BYTES) break;
    }
    abandon(res.body);
    const first = Buffer.concat(head).subarray(0, SNIFF_BYTES);
    const ext = sniffImageType(first, true);
    if (ext) return { type: IMAGE_MEDIA_TYPES[ext] ?? ext };
    return { why: `not an image (content type ${JSON.stringify(headerOf(res.headers, 'content-type') ?? '(none)')})` };
  } catch (err) {
    if (options.signal?.aborted) throw err;
    const told = err instanceof ApplicationFailure ? (err.details?.[0] as { reason?: unknown } | undefined) : undefined;
    // A refusal of the guard, a bad URL, too many redirects: an answer. No answer (a reset, a timeout): transient.
    const answered = err instanceof ApplicationFailure && err.nonRetryable;
    return {
      why: typeof told?.reason === 'string' ? told.reason : describeError(deadline.expired ? deadline.error : err),
      ...(answered ? {} : TRANSIENT),
    };
  } finally {
    deadline.clear();
  }
}

/**
 * Reads and drops a body that is not wanted (an error page, a redirect), so the connection can be reused; a body
 * that fails or runs past the deadline meanwhile only loses the connection.
 */
async function discard(res: Dispatcher.ResponseData): Promise<void> {
  await res.body.dump().catch(() => undefined);
}
