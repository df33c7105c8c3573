import { createHash, randomUUID } from 'node:crypto';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LedgerKey } from '../ledger';
import type { DownloadedImage } from '../model';
import { makeRowFolder } from './download-files';

/** Images a key saved, as the ledger store lists them: still there, or copied into another batch's folder. */

/** Whether every image listed is in `outDir`, with its size. */
export async function allSaved(outDir: string, images: readonly DownloadedImage[]): Promise<boolean> {
  for (const image of images) {
    const found = await stat(path.resolve(outDir, image.path)).catch(() => undefined);
    if (found?.size !== image.bytes) return false;
  }
  return true;
}

/**
 * The images an earlier key saved, copied into this row's folder of `outDir` and checked against their SHA-256;
 * undefined when one of them is gone or changed (its creation is then fetched again).
 */
export async function copyImages(
  source: LedgerKey,
  outDir: string,
  rowId: string,
): Promise<DownloadedImage[] | undefined> {
  const images = source.ended?.images ?? [];
  if (images.length === 0 || !source.outDir) return undefined;
  const copied: DownloadedImage[] = [];
  for (const image of images) {
    const from = path.resolve(source.outDir, image.path);
    const bytes = await readFile(from).catch(() => undefined);
    if (!bytes || bytes.length !== image.bytes || sha256(bytes) !== image.sha256) return undefined;
    const relative = path.join(rowId, path.basename(image.path));
    const to = path.resolve(outDir, relative);
    if (to !== from) {
      await makeRowFolder(path.resolve(outDir), path.dirname(to));
      const partial = `${to}.${randomUUID()}.partial`;
      await writeFile(partial, bytes, { flag: 'wx' });
      await rename(partial, to);
    }
    copied.push({ ...image, path: relative });
  }
  return copied;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
