import { createHash } from 'node:crypto';
import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyImages } from '../../src/activities/saved-images';
import type { LedgerKey } from '../../src/ledger';
import { FailureType } from '../../src/model';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * Issue 44, point 7: saving images never goes through a batch or row folder that is a symbolic link (one planted
 * there would send the images elsewhere); the failure names the folder, and nothing is written where it points.
 */

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
const input = {
  batchId: 'b1',
  rowId: 'row-7',
  creationId: 'cr_1',
  images: [{ url: `data:image/png;base64,${PNG.toString('base64')}` }],
  outDir: 'batch-out',
};

let out: { dir: string; cleanup: () => Promise<void> };
let elsewhere: { dir: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  out = await tempDir();
  elsewhere = await tempDir();
});
afterEach(async () => {
  await out.cleanup();
  await elsewhere.cleanup();
});

describe.skipIf(process.platform === 'win32')('saving images', () => {
  for (const [which, link] of [
    ['row', path.join('batch-out', 'row-7')],
    ['batch', 'batch-out'],
  ] as const) {
    it(`refuses a ${which} folder that is a symbolic link, naming it, and writes nothing where it points`, async () => {
      await mkdir(path.dirname(path.join(out.dir, link)), { recursive: true });
      await symlink(elsewhere.dir, path.join(out.dir, link));
      const { activities } = activitiesFor('http://127.0.0.1:9/api/public/v1', {}, { outputRoot: out.dir });
      const r = await runActivity(() => activities.downloadImages(input));
      expect(r.failure?.type).toBe(FailureType.Config);
      expect(r.failure?.message).toContain(`the folder ${path.join(out.dir, link)} is a symbolic link`);
      expect(await readdir(elsewhere.dir)).toEqual([]);
    });
  }
});

describe.skipIf(process.platform === 'win32')('copying the images an earlier key saved', () => {
  it('writes through a temporary file of its own, not a link planted at a name it could guess', async () => {
    const from = path.join(out.dir, 'old', 'row-1');
    await mkdir(from, { recursive: true });
    await writeFile(path.join(from, 'cr_1-0.png'), PNG);
    const sha256 = createHash('sha256').update(PNG).digest('hex');
    const image = { url: 'https://x/0.png', path: 'row-1/cr_1-0.png', sha256, bytes: PNG.length };
    const source = { outDir: path.join(out.dir, 'old'), ended: { images: [image] } } as unknown as LedgerKey;
    const to = path.join(out.dir, 'new', 'row-7');
    await mkdir(to, { recursive: true });
    await symlink(path.join(elsewhere.dir, 'planted.png'), path.join(to, 'cr_1-0.png.partial'));
    const copied = await copyImages(source, path.join(out.dir, 'new'), 'row-7');
    expect(copied?.map((c) => c.path)).toEqual([path.join('row-7', 'cr_1-0.png')]);
    expect(await readdir(elsewhere.dir)).toEqual([]);
  });
});
