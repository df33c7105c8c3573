import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Dispatcher } from 'undici';
import type { ImageRef } from '../model';
import { SNIFF_BYTES, sniffImageType } from '../api/image-type';
import { decodeDataUri, describeImageUrl } from './data-uri';
import { downloadFailed, symlinkedFolder } from './failures';

/** A download's files (see download.ts): the options, the sidecar of a saved image, an inline image saved. */

/**
 * Makes `rowDir` (and the folders above it) and refuses, naming it, a batch or row folder that is a symbolic link:
 * one planted there would send the images elsewhere.
 */
export async function makeRowFolder(batchDir: string, rowDir: string): Promise<void> {
  // One at a time, each checked before anything is made in it.
  for (const folder of [batchDir, rowDir]) {
    await mkdir(folder, { recursive: true });
    if ((await lstat(folder)).isSymbolicLink()) throw symlinkedFolder(folder);
  }
}

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

export interface Sidecar {
  url: string;
  file: string;
  sha256: string;
  bytes: number;
}

/** The extensions a saved image may have: one per type recognised by {@link sniffImageType}. */
const IMAGE_EXTENSIONS: ReadonlySet<string> = new Set(['png', 'jpg', 'gif', 'webp', 'avif']);

/** Saves an inline image (a data: URI): decoded here, no request; the same checks, names and sidecar as a download. */
export async function saveInline(
  image: ImageRef,
  index: number,
  rowDir: string,
  base: string,
  options: DownloadOptions,
  budget: number | undefined,
): Promise<Sidecar> {
  const label = describeImageUrl(image.url, image.source);
  let tooLarge = false;
  const fail = (reason: string) =>
    downloadFailed(`image ${index} (${label}): ${reason}`, {
      url: label,
      index,
      reason,
      ...(tooLarge ? { tooLarge } : {}),
    });
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
    const fh = await open(tempPath, 'wx');
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
export function overLimit(size: number, prefix: string, options: DownloadOptions, budget: number | undefined) {
  if (size > options.maxBytes) return `${prefix} exceeds the limit of ${options.maxBytes} bytes`;
  if (budget !== undefined && size > budget) {
    return `${prefix} exceeds what is left (${budget} bytes) of the creation's budget of ${options.maxTotalBytes} bytes (num_images × IMAGEGEN_MAX_DOWNLOAD_BYTES)`;
  }
  return undefined;
}

/** Writes `<base>.json`, the sidecar of a saved image, atomically (a temporary file renamed into place). */
export async function writeSidecar(rowDir: string, base: string, sidecar: Sidecar): Promise<void> {
  const sidecarTemp = path.join(rowDir, `.${base}.${randomUUID()}.json.part`);
  const sfh = await open(sidecarTemp, 'wx');
  try {
    await sfh.writeFile(`${JSON.stringify(sidecar)}\n`);
  } finally {
    await sfh.close();
  }
  await rename(sidecarTemp, path.join(rowDir, `${base}.json`));
}

/** The sidecar of a finished download, if it and the file it names agree (size and SHA-256). */
export async function completed(rowDir: string, base: string): Promise<Sidecar | undefined> {
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

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
