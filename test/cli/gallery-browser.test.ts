import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chromiumVersion, findChromium, HeadlessChromium } from './chromium';
import { REPO_ROOT, cli, cliJson, describeRun } from './helpers';
import { startStack, type CliStack } from './stack';

/**
 * The results gallery in a real browser. A small batch runs through the CLI (`run --follow`, then `results`),
 * and headless Chromium opens its index.html from disk. The check uses the DevTools protocol over
 * `--remote-debugging-pipe` (fds 3 and 4; no port, no WebSocket client, so it runs on Node 20): after the load
 * event, a script in the page switches the gallery's lazy thumbnails to eager, waits for each to load or fail,
 * and returns `complete`, `naturalWidth` and `naturalHeight` of every <img>, the browser's own verdict on
 * whether the image file was found and decoded. A `--dump-dom` or a screenshot alone cannot say that. A
 * screenshot of the whole page goes to test-output/. A missing Chromium fails the test, it never skips it.
 */

let stack: CliStack;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 5,
      generation: { queuedMs: { minMs: 50, maxMs: 100 }, runningMs: { minMs: 150, maxMs: 300 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
    },
    minPollIntervalMs: 250,
    taskQueue: 'imagebatch-cli-gallery',
  });
});

afterAll(async () => {
  await stack?.stop();
});

const ROWS = [
  'id,prompt,model,num_images,width,height',
  'g1,a lighthouse on a basalt cliff at dusk,,,,',
  'g2,a red fox curled up in fresh snow,flux-schnell,2,,',
  'row:3,"a tram crossing a bridge, rain & neon <night>",,,512,768',
  'g4,[unsafe] a dragon over a burning village,,,,',
  'g5,a bowl of ramen with steam rising,,,768,512',
];

interface ImageState {
  src: string;
  complete: boolean;
  width: number;
  height: number;
  row: string | null;
}

/** Runs in the page: loads every thumbnail (the gallery lazy-loads them) and reports each one's state. */
const CHECK_IMAGES = `(async () => {
  const images = [...document.images];
  for (const img of images) img.loading = 'eager';
  const settled = (img) => img.complete ? Promise.resolve() : new Promise((resolve) => {
    img.addEventListener('load', resolve, { once: true });
    img.addEventListener('error', resolve, { once: true });
  });
  await Promise.race([Promise.all(images.map(settled)), new Promise((resolve) => setTimeout(resolve, 10000))]);
  return {
    cards: document.querySelectorAll('figure.card').length,
    images: images.map((img) => ({
      src: img.getAttribute('src'),
      complete: img.complete,
      width: img.naturalWidth,
      height: img.naturalHeight,
      row: img.closest('figure') ? img.closest('figure').dataset.row : null,
    })),
  };
})()`;

it('every thumbnail of a results gallery loads in headless Chromium', async () => {
  const executable = findChromium(); // throws a clear error when Chromium is missing: the test fails
  const file = path.join(stack.dir, 'gallery.csv');
  const out = path.join(stack.dir, 'out-gallery');
  await writeFile(file, `${ROWS.join('\n')}\n`);
  const run = ['run', file, '--batch-id', 'cli-gallery', '--model', 'flux-dev', '--out', out, '--follow', '--json'];
  run.push('--allow-partial'); // the [unsafe] row fails
  const r = await cli(run, { env: stack.cliEnv, timeoutMs: 60_000 });
  expect(r.code, describeRun(run, r)).toBe(0);
  expect(JSON.parse(r.stdout)).toMatchObject({ status: 'completed', counts: { succeeded: 4, failed: 1 } });
  const written = await cliJson<{ gallery: string; resultsJsonl: string }>(['results', 'cli-gallery', '--json'], {
    env: stack.cliEnv,
  });
  const records = (await readFile(written.resultsJsonl, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { row_id: string; images: { path: string }[] });
  const expected = records.flatMap((rec) => rec.images.map((i) => ({ row: rec.row_id, path: i.path })));
  expect(expected).toHaveLength(5);

  const browser = await HeadlessChromium.launch(executable);
  try {
    const url = pathToFileURL(written.gallery).href;
    const page = await browser.open(url);
    const seen = await browser.evaluate<{ cards: number; images: ImageState[] }>(page, CHECK_IMAGES);
    const version = chromiumVersion(executable) ?? executable;
    expect(seen.cards, version).toBe(5);
    expect(seen.images.map((i) => ({ row: i.row, path: decodeURIComponent(i.src) }))).toEqual(expected);
    for (const image of seen.images) {
      expect(image, `${image.src} did not load in ${version}`).toMatchObject({ complete: true });
      expect(image.width, `${image.src} has no width in ${version}`).toBeGreaterThan(0);
      expect(image.height, `${image.src} has no height in ${version}`).toBeGreaterThan(0);
    }

    const png = await browser.screenshot(page);
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(png.readUInt32BE(16)).toBeGreaterThanOrEqual(1000); // IHDR width: the whole 1280 px window
    expect(png.readUInt32BE(20)).toBeGreaterThan(200);
    await mkdir(path.join(REPO_ROOT, 'test-output'), { recursive: true });
    await writeFile(path.join(REPO_ROOT, 'test-output', 'gallery-browser.png'), png);

    // The check can fail: with one image file gone, the browser reports exactly that thumbnail as broken.
    const victim = path.join(out, expected[0]!.path);
    await rename(victim, `${victim}.gone`);
    try {
      const again = await browser.evaluate<{ images: ImageState[] }>(await browser.open(url), CHECK_IMAGES);
      const broken = again.images.filter((i) => i.width === 0);
      expect(broken.map((i) => decodeURIComponent(i.src))).toEqual([expected[0]!.path]);
    } finally {
      await rename(`${victim}.gone`, victim);
    }
  } finally {
    await browser.close();
  }
}, 120_000);
