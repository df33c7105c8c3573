import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity, tempDir } from './helpers';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let servers: StubServer[] = [];
let out: { dir: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  out = await tempDir();
});
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
  await out.cleanup();
});

async function files(reply: (url: string, i: number) => StubReply) {
  const server = await startStub((r, i) => reply(r.url, i));
  servers.push(server);
  return server;
}

const png = (): StubReply => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG });

function downloadInput(urls: string[]) {
  return {
    batchId: 'b1',
    rowId: 'row-7',
    creationId: 'cr_1',
    images: urls.map((url) => ({ url })),
    outDir: 'batch-out',
  };
}

describe('downloadImages', () => {
  it('writes <outDir>/<rowId>/<creationId>-<n>.<ext> with its checksum, sending no credentials', async () => {
    const server = await files(() => ({
      status: 200,
      headers: { 'content-type': 'image/png' },
      body: PNG,
    }));
    const { activities } = activitiesFor('http://127.0.0.1:9/api/public/v1', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(downloadInput([`${server.origin}/f/0.png`, `${server.origin}/f/1`])),
    );
    expect(r.failure).toBeUndefined();
    expect(r.value).toEqual([
      { url: `${server.origin}/f/0.png`, path: 'row-7/cr_1-0.png', sha256: sha(PNG), bytes: PNG.length },
      { url: `${server.origin}/f/1`, path: 'row-7/cr_1-1.png', sha256: sha(PNG), bytes: PNG.length },
    ]);
    const rowDir = path.join(out.dir, 'batch-out', 'row-7');
    expect(await readFile(path.join(rowDir, 'cr_1-0.png'))).toEqual(PNG);
    // Only final files and their sidecars: no temporary file is left behind.
    expect((await readdir(rowDir)).sort()).toEqual(['cr_1-0.json', 'cr_1-0.png', 'cr_1-1.json', 'cr_1-1.png']);
    for (const req of server.requests) {
      expect(req.headers.authorization).toBeUndefined();
      expect(req.headers['x-api-key']).toBeUndefined();
      expect(req.headers.cookie).toBeUndefined();
      expect(JSON.stringify(req.headers)).not.toContain(SECRET_KEY);
    }
  });

  it('skips an image whose file and sidecar agree, and downloads it again when the file was damaged', async () => {
    const server = await files(() => png());
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const input = downloadInput([`${server.origin}/a.png`]);
    const first = await runActivity(() => activities.downloadImages(input));
    const second = await runActivity(() =>
      activities.downloadImages({ ...input, images: [{ url: `${server.origin}/a.png?sig=new` }] }),
    );
    expect(server.requests).toHaveLength(1);
    expect(second.value?.[0]).toMatchObject({ path: 'row-7/cr_1-0.png', sha256: sha(PNG), bytes: PNG.length });
    expect(first.value?.[0]?.sha256).toBe(sha(PNG));
    await writeFile(path.join(out.dir, 'batch-out', 'row-7', 'cr_1-0.png'), Buffer.from('truncated'));
    const third = await runActivity(() => activities.downloadImages(input));
    expect(server.requests).toHaveLength(2);
    expect(third.value?.[0]?.sha256).toBe(sha(PNG));
  });

  it('aborts an image over the size limit (declared or streamed) with a clear non-retryable error and no file', async () => {
    const server = await files((url) =>
      url === '/declared'
        ? {
            status: 200,
            headers: { 'content-type': 'image/png', 'content-length': '500000' },
            stream: { bytes: 500_000 },
          }
        : {
            status: 200,
            headers: { 'content-type': 'image/png', 'transfer-encoding': 'chunked' },
            body: Buffer.concat([PNG, Buffer.alloc(500_000)]),
          },
    );
    const { activities } = activitiesFor(
      'http://127.0.0.1:9/x',
      { maxDownloadBytes: 100_000 },
      { outputRoot: out.dir },
    );
    for (const p of ['/declared', '/streamed']) {
      const r = await runActivity(() => activities.downloadImages(downloadInput([`${server.origin}${p}`])));
      expect(r.failure?.type).toBe(FailureType.DownloadFailed);
      expect(r.failure?.nonRetryable).toBe(true);
      expect(r.failure?.message).toMatch(/exceeds the limit of 100000 bytes/);
    }
    expect(await readdir(path.join(out.dir, 'batch-out', 'row-7'))).toEqual([]);
  });

  it('refuses a body that is not an image, and classifies HTTP errors', async () => {
    const server = await files((url) =>
      url === '/html'
        ? { status: 200, headers: { 'content-type': 'text/html' }, body: '<html>' }
        : url === '/gone'
          ? { status: 404, body: '' }
          : { status: 503, headers: { 'retry-after': '4' }, body: '' },
    );
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const html = await runActivity(() => activities.downloadImages(downloadInput([`${server.origin}/html`])));
    expect([html.failure?.type, html.failure?.nonRetryable]).toEqual([FailureType.DownloadFailed, true]);
    expect(html.failure?.message).toMatch(/not an image: its first bytes are none of PNG, JPEG, GIF, WebP or AVIF/);
    const gone = await runActivity(() => activities.downloadImages(downloadInput([`${server.origin}/gone`])));
    expect([gone.failure?.nonRetryable, gone.failure?.details?.[0]]).toEqual([
      true,
      { url: `${server.origin}/gone`, index: 0, reason: 'HTTP 404', httpStatus: 404 },
    ]);
    const busy = await runActivity(() => activities.downloadImages(downloadInput([`${server.origin}/busy`])));
    expect([busy.failure?.nonRetryable, busy.failure?.nextRetryDelay]).toEqual([false, 4000]);
  });

  it('follows a redirect to another host without credentials, a bounded number of times', async () => {
    const target = await files(() => png());
    const redirector = await files((url, i) =>
      url.startsWith('/loop')
        ? { status: 302, headers: { location: `/loop?${i}` }, body: '' }
        : { status: 302, headers: { location: `${target.origin}/real.png` }, body: '' },
    );
    const { activities } = activitiesFor('http://127.0.0.1:9/x', { downloadMaxRedirects: 2 }, { outputRoot: out.dir });
    const ok = await runActivity(() => activities.downloadImages(downloadInput([`${redirector.origin}/moved`])));
    expect(ok.value?.[0]?.sha256).toBe(sha(PNG));
    expect(target.requests[0]?.headers.authorization).toBeUndefined();
    expect(target.requests[0]?.headers['x-api-key']).toBeUndefined();
    const loop = await runActivity(() =>
      activities.downloadImages({ ...downloadInput([`${redirector.origin}/loop`]), creationId: 'cr_2' }),
    );
    expect(loop.failure?.message).toMatch(/more than 2 redirects/);
  });

  it('heartbeats while streaming a large image', async () => {
    const webp = Buffer.from('RIFF\x00\x00\x00\x00WEBPVP8 ', 'latin1');
    const server = await files(() => ({
      status: 200,
      headers: { 'content-type': 'image/webp' },
      body: Buffer.concat([webp, Buffer.alloc(3_000_000 - webp.length)]),
    }));
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() => activities.downloadImages(downloadInput([`${server.origin}/big`])));
    expect(r.value?.[0]).toMatchObject({ path: 'row-7/cr_1-0.webp', bytes: 3_000_000 });
    expect(r.heartbeats.length).toBeGreaterThanOrEqual(3);
  });

  it('keeps row and creation ids inside the output folder', async () => {
    const server = await files(() => png());
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages({ ...downloadInput([`${server.origin}/a`]), rowId: '../../etc', creationId: 'c/../x' }),
    );
    expect(r.value?.[0]?.path).toBe('.._.._etc/c_.._x-0.png');
    const bad = await runActivity(() =>
      activities.downloadImages({ ...downloadInput([`${server.origin}/a`]), rowId: '..' }),
    );
    expect(bad.failure?.type).toBe(FailureType.Config);
  });
});

describe('createImage, once its creation is known', () => {
  it('polls once and, when the creation succeeded, downloads its images', async () => {
    const images = await files(() => png());
    const api = await startStub(() => ({
      status: 200,
      body: {
        id: 'cr_1',
        status: 'succeeded',
        cost_usd: 0.04,
        images: [{ url: `${images.origin}/cr_1-0.png`, width: 1, height: 1 }],
      },
    }));
    servers.push(api);
    const { activities, clock } = activitiesFor(api.url, {}, { outputRoot: out.dir });
    // The attempt after the acceptance: the creation and its price come from the previous attempt's heartbeat.
    const r = await runActivity(
      () =>
        activities.createImage({
          idempotencyKey: 'ib.b1.row-7.a1',
          request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
          batchId: 'b1',
          rowId: 'row-7',
          outDir: 'batch-out',
          maxPollWaitMs: 30 * 60_000,
        }),
      { heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 5_000, costUsd: 0.04 } },
    );
    expect(r.failure).toBeUndefined();
    // (What limit bound the worker is not this test's: test/activities/create-image.test.ts.)
    expect({ ...r.value, limit: undefined }).toEqual({
      outcome: 'succeeded',
      creationId: 'cr_1',
      costUsd: 0.04,
      images: [
        {
          url: `${images.origin}/cr_1-0.png`,
          // Where the record held it: the results say so.
          source: 'images[0].url',
          path: 'row-7/cr_1-0.png',
          sha256: sha(PNG),
          bytes: PNG.length,
        },
      ],
    });
    // One request to the service (the poll, never a submission), then the image, without any credential.
    expect(api.requests.map((q) => q.method)).toEqual(['GET']);
    expect(images.requests).toHaveLength(1);
    expect(images.requests[0]?.headers.authorization).toBeUndefined();
    expect(await readFile(path.join(out.dir, 'batch-out', 'row-7', 'cr_1-0.png'))).toEqual(PNG);
  });
});
