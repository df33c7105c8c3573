import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { downloadImages } from '../../src/activities/download';
import { decodeDataUri, describeImageUrl } from '../../src/activities/data-uri';
import { noImageFailure } from '../../src/activities/image-limits';
import { FailureType } from '../../src/model';
import { tempLedger, testPrint } from '../helpers/ledger';
import { renderImage } from '../../src/simulator/png';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * Inline images (a `data:<type>;base64,...` URI in the poll's record) are saved like downloaded ones, with no request:
 * the same type check from the first bytes, the same names, sidecar and checksum, the same limits; their data never
 * leaves the activity. And a creation whose status says success but whose record shows no image is not a success.
 */
const PNG = renderImage('a lighthouse at dusk', 7, 0, 32, 32);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(60, 7)]);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const dataUri = (bytes: Buffer, type = 'image/png') => `data:${type};base64,${bytes.toString('base64')}`;

let out: { dir: string; cleanup: () => Promise<void> };
let servers: StubServer[] = [];
beforeEach(async () => {
  out = await tempDir();
});
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
  await out.cleanup();
});

function input(images: { url: string; source?: string }[]) {
  return { batchId: 'b1', rowId: 'row-7', creationId: 'cr_1', images, outDir: 'batch-out' };
}
const rowDir = () => path.join(out.dir, 'batch-out', 'row-7');

describe('downloadImages: inline (data: URI) images', () => {
  it('saves a data: URI image like a downloaded one: named by its bytes, checksum on disk, no data in the result', async () => {
    // No service and no file server: an inline image needs no request (port 9 refuses any connection).
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const images = [
      { url: dataUri(PNG), source: 'data[0].b64_json' },
      // Declared PNG, but the bytes are a JPEG: the bytes decide. URL-safe alphabet, wrapped lines, no padding.
      { url: `data:image/png;base64,${JPEG.toString('base64url').replace(/(.{20})/g, '$1\n')}` },
    ];
    const r = await runActivity(() => activities.downloadImages(input(images)));
    expect(r.failure).toBeUndefined();
    expect(r.value).toEqual([
      {
        url: `data:image/png;base64 (${PNG.length} bytes) at data[0].b64_json`,
        source: 'data[0].b64_json',
        path: 'row-7/cr_1-0.png',
        sha256: sha(PNG),
        bytes: PNG.length,
      },
      { url: `data:image/png;base64 (${JPEG.length} bytes)`, path: 'row-7/cr_1-1.jpg', sha256: sha(JPEG), bytes: 64 },
    ]);
    // The files on disk are the bytes, and their checksums are what the result says.
    const onDisk = await readFile(path.join(rowDir(), 'cr_1-0.png'));
    expect(onDisk.equals(PNG)).toBe(true);
    expect(sha(onDisk)).toBe(r.value?.[0]?.sha256);
    expect(sha(await readFile(path.join(rowDir(), 'cr_1-1.jpg')))).toBe(sha(JPEG));
    expect((await readdir(rowDir())).sort()).toEqual(['cr_1-0.json', 'cr_1-0.png', 'cr_1-1.jpg', 'cr_1-1.json']);
    // Nothing of the data leaves: not the result (Temporal history), not the sidecar.
    const b64 = PNG.toString('base64');
    expect(JSON.stringify(r.value)).not.toContain(b64.slice(0, 40));
    const sidecar = await readFile(path.join(rowDir(), 'cr_1-0.json'), 'utf8');
    expect(sidecar).not.toContain(b64.slice(0, 40));
    expect(JSON.parse(sidecar)).toMatchObject({ file: 'cr_1-0.png', sha256: sha(PNG), bytes: PNG.length });

    // Saved once: a second call finds the file and its sidecar, and still describes rather than repeats the data.
    const again = await runActivity(() => activities.downloadImages(input(images)));
    expect(again.value).toEqual(r.value);
  });

  it('refuses a malformed data URI and bytes that are not an image, non-retryably, without its data in the error', async () => {
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const html = Buffer.from(`<html><body>${'x'.repeat(200)}</body></html>`);
    const cases: [string, RegExp][] = [
      [`data:image/png;base64${PNG.toString('base64')}`, /malformed data URI: no ',' before its data/],
      [`data:image/png,${PNG.toString('hex')}`, /malformed data URI: not base64/],
      [`data:image/png;base64,${PNG.toString('base64').slice(0, 40)}*!${'A'.repeat(100)}`, /not valid base64/],
      [`data:image/png;base64,${PNG.toString('base64').slice(0, 41)}`, /not valid base64/],
      ['data:image/png;base64,', /malformed data URI: no data/],
      [
        dataUri(html),
        /not an image: its first bytes are none of PNG, JPEG, GIF, WebP or AVIF \("<html><body>xxxx"; declared type "image\/png" ignored\)/,
      ],
    ];
    for (const [url, reason] of cases) {
      const r = await runActivity(() => activities.downloadImages(input([{ url, source: 'output.image' }])));
      expect(r.failure?.type, url.slice(0, 60)).toBe(FailureType.DownloadFailed);
      expect(r.failure?.nonRetryable).toBe(true);
      expect(r.failure?.message).toMatch(reason);
      expect(r.failure?.message).toMatch(/^image 0 \(data:.*\(\d+ characters\) at output\.image\): /);
      const payload = url.slice(url.indexOf(',') + 1);
      if (payload.length > 20) expect(JSON.stringify(r.failure?.details)).not.toContain(payload.slice(0, 20));
      if (payload.length > 20) expect(r.failure?.message).not.toContain(payload.slice(0, 20));
    }
    expect(await readdir(rowDir())).toEqual([]);
  });

  it('holds an inline image to the image size limit and to the creation byte budget, before decoding it', async () => {
    const { activities } = activitiesFor(
      'http://127.0.0.1:9/x',
      { maxDownloadBytes: PNG.length - 1 },
      { outputRoot: out.dir },
    );
    const r = await runActivity(() => activities.downloadImages(input([{ url: dataUri(PNG) }])));
    expect(r.failure?.type).toBe(FailureType.DownloadFailed);
    expect(r.failure?.nonRetryable).toBe(true);
    expect(r.failure?.message).toContain(`image of ${PNG.length} bytes exceeds the limit of ${PNG.length - 1} bytes`);

    // The creation's budget: the first image fits, the second is more than what is left of it.
    const dispatcher = new Agent();
    try {
      const options = {
        dispatcher,
        outputRoot: out.dir,
        maxBytes: 1_000_000,
        maxTotalBytes: PNG.length + 10,
        maxRedirects: 0,
        headersTimeoutMs: 1000,
        bodyTimeoutMs: 1000,
        defaultRetryAfterMs: 1000,
        now: () => 0,
      };
      const both = downloadImages(input([{ url: dataUri(PNG) }, { url: dataUri(PNG) }]), options);
      await expect(both).rejects.toMatchObject({
        type: FailureType.DownloadFailed,
        nonRetryable: true,
        message: expect.stringContaining(
          `image of ${PNG.length} bytes exceeds what is left (10 bytes) of the creation's budget of ${PNG.length + 10} bytes`,
        ) as unknown,
      });
    } finally {
      await dispatcher.close();
    }
    expect((await readdir(rowDir())).sort()).toEqual(['cr_1-0.json', 'cr_1-0.png']);
  });

  it('decodes only what it can size first: a payload over the limit is refused without decoding', () => {
    const huge = `data:image/png;base64,${'A'.repeat(4_000_000)}`;
    const decoded = decodeDataUri(huge, (n) => (n > 1000 ? `image of ${n} bytes exceeds the limit` : undefined));
    expect(decoded).toEqual({ refused: 'image of 3000000 bytes exceeds the limit' });
  });

  it('describes an image for history: an http URL as it is, a data: URI by type, size and source only', () => {
    expect(describeImageUrl('https://cdn.example/a.png', 'images[0].url')).toBe('https://cdn.example/a.png');
    expect(describeImageUrl(dataUri(PNG), 'data[0].b64_json')).toBe(
      `data:image/png;base64 (${PNG.toString('base64').length} characters) at data[0].b64_json`,
    );
    expect(describeImageUrl(dataUri(PNG), undefined, PNG.length)).toBe(`data:image/png;base64 (${PNG.length} bytes)`);
    // A hostile header is cut and loses its control characters; no data ever follows it.
    const long = describeImageUrl(`data:image/png;x=${'\u001b[2J'.repeat(100)};base64,${'A'.repeat(5000)}`);
    expect(long.length).toBeLessThan(160);
    expect(long).not.toContain('\u001b');
    expect(long).not.toContain('AAAA');
  });
});

describe('pollCreation: no inline data in its result', () => {
  it('replaces an inline image by its description', async () => {
    const api = await startStub(() => ({
      status: 200,
      body: { id: 'cr_1', status: 'succeeded', images: [{ url: dataUri(PNG) }] },
    }));
    servers.push(api);
    const { activities } = activitiesFor(api.url, {}, { outputRoot: out.dir });
    const r = await runActivity(() => activities.pollCreation({ creationId: 'cr_1' }));
    expect(r.failure).toBeUndefined();
    expect(r.value).toMatchObject({
      outcome: 'succeeded',
      images: [{ url: expect.stringMatching(/^data:image\/png;base64 \(\d+ characters\)/) as unknown }],
    });
    expect(JSON.stringify(r.value)).not.toContain(PNG.toString('base64').slice(0, 40));
  });

  it('bounds where an image was found: a hostile record may name its fields at any length', async () => {
    const api = await startStub(() => ({
      status: 200,
      body: { id: 'cr_1', status: 'succeeded', result: { ['k'.repeat(20_000)]: { url: dataUri(PNG) } } },
    }));
    servers.push(api);
    const { activities } = activitiesFor(api.url, {}, { outputRoot: out.dir });
    const r = await runActivity(() => activities.pollCreation({ creationId: 'cr_1' }));
    const images = r.value?.outcome === 'succeeded' ? r.value.images : [];
    expect(images).toHaveLength(1);
    expect(images[0]?.source?.length).toBeLessThanOrEqual(200);
    expect(JSON.stringify(r.value).length).toBeLessThan(1000);
  });
});

describe('createImage: a success with no image', () => {
  const request = { prompt: 'a lighthouse at dusk', model: 'flux-dev' };
  const createInput = {
    idempotencyKey: 'ib/b1/row-7/a1',
    request,
    batchId: 'b1',
    rowId: 'row-7',
    outDir: 'batch-out',
    maxPollWaitMs: 30 * 60_000,
  };

  it('stops the batch (images refused) naming the record keys (never values) and the setting; the key stays open', async () => {
    const api = await startStub(() => ({
      status: 200,
      body: {
        id: 'cr_1',
        status: 'succeeded',
        cost_usd: 0.04,
        prompt_echo: 'SECRET-VALUE-1 a lighthouse',
        artifacts: { primary: { location: 'SECRET-VALUE-2' } },
      },
    }));
    servers.push(api);
    const ledger = await tempLedger();
    // The key was sent and accepted (an earlier attempt): this attempt polls its creation.
    const ids = { batchId: 'b1', rowId: 'row-7', idempotencyKey: createInput.idempotencyKey };
    await ledger.append([
      { type: 'sending', ...ids, request, ...testPrint(request) },
      { type: 'accepted', ...ids, creationId: 'cr_1', costUsd: 0.04 },
    ]);
    const { activities, clock } = activitiesFor(api.url, {}, { outputRoot: out.dir, ledger });
    const r = await runActivity(() => activities.createImage(createInput), {
      heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 5_000, costUsd: 0.04 },
    });
    expect(r.value).toBeUndefined();
    expect(r.failure?.type).toBe(FailureType.BatchStop);
    expect(r.failure?.nonRetryable).toBe(true);
    expect(r.failure?.details?.[0]).toMatchObject({ reason: 'images_refused' });
    const message = r.failure?.message ?? '';
    expect(message).toContain('the record of creation cr_1 (status "succeeded") shows no image');
    expect(message).toContain('its top-level fields are id, status, cost_usd, prompt_echo, artifacts');
    expect(message).toContain('set IMAGEGEN_IMAGE_FIELDS');
    expect(message).toContain('imagebatch resume b1');
    expect(JSON.stringify(r.failure?.details)).not.toContain('SECRET-VALUE');
    expect(message).not.toContain('SECRET-VALUE');
    // One poll, no submission; the key stays open with its creation, for the resume to fetch it again.
    expect(api.requests.map((q) => q.method)).toEqual(['GET']);
    const key = await ledger.key(createInput.idempotencyKey);
    expect(key).toMatchObject({ creationId: 'cr_1', costUsd: 0.04 });
    expect(key?.ended).toBeUndefined();
    await ledger.close();
  });

  it('words the message for every shape of record keys', () => {
    const base = { creationId: 'c', status: 'done', imageFields: ['images[].url'] };
    expect(noImageFailure({ ...base, recordKeys: undefined }).message).toContain(
      'its top-level fields were not reported',
    );
    expect(noImageFailure({ ...base, recordKeys: [] }).message).toContain('it has no top-level field');
    const many = Array.from({ length: 20 }, (_, i) => `f${i}`);
    const m = noImageFailure({ ...base, imageFields: many, recordKeys: ['id'] }).message;
    expect(m).toContain('IMAGEGEN_IMAGE_FIELDS (f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, and 8 more)');
  });
});
