import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FailureType, type ImageRef } from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * Images found by discovery are candidates: each is fetched through the same guard and limits, and kept only when its
 * bytes are an image (whatever its Content-Type); one that is no image (an API link, a webhook, a web page) is dropped
 * without failing the row. Only when no candidate is an image does the download fail.
 */

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

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

/** A host that answers like a queue service's CDN and API side by side. */
async function host(): Promise<StubServer> {
  const server = await startStub((req): StubReply => {
    switch (req.url) {
      case '/artifacts/a1':
        return { status: 302, headers: { location: '/blob/a1' }, body: '' };
      case '/blob/a1':
        return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: PNG };
      case '/v1/jobs/a1':
        return { status: 401, headers: { 'content-type': 'application/json' }, body: { detail: 'no key' } };
      case '/page':
        return { status: 200, headers: { 'content-type': 'text/html' }, body: '<!doctype html><html></html>' };
      case '/busy':
        return { status: 503, headers: { 'retry-after': '3' }, body: '' };
      default:
        return { status: 404, body: 'not found' };
    }
  });
  servers.push(server);
  return server;
}

const candidate = (url: string, source: string): ImageRef => ({
  url,
  source: `${source} (discovered)`,
  candidate: true,
});

function input(images: ImageRef[]) {
  return { batchId: 'b1', rowId: 'row-1', creationId: 'cr_1', images, outDir: 'batch-out' };
}

describe('candidates found by discovery', () => {
  it('keeps the one whose bytes are an image (after a redirect, sent as octet-stream), drops the others', async () => {
    const s = await host();
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(
        input([
          candidate(`${s.origin}/v1/jobs/a1`, 'urls.get'),
          candidate(`${s.origin}/page`, 'links.web'),
          candidate(`${s.origin}/artifacts/a1`, 'result.artifact_location'),
        ]),
      ),
    );
    expect(r.failure).toBeUndefined();
    expect(r.value).toEqual([
      {
        url: `${s.origin}/artifacts/a1`,
        source: 'result.artifact_location (discovered)',
        path: 'row-1/cr_1-2.png',
        sha256: expect.any(String) as string,
        bytes: PNG.length,
      },
    ]);
    expect((await readdir(path.join(out.dir, 'batch-out', 'row-1'))).sort()).toEqual(['cr_1-2.json', 'cr_1-2.png']);
    // The API key went nowhere: not to the API link, not to the file.
    expect(s.requests.every((q) => q.headers.authorization === undefined && q.headers['x-api-key'] === undefined)).toBe(
      true,
    );
  });

  it('none of them an image: a DownloadFailed for good, naming why each was dropped', async () => {
    const s = await host();
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(
        input([candidate(`${s.origin}/v1/jobs/a1`, 'urls.get'), candidate(`${s.origin}/page`, 'links.web')]),
      ),
    );
    expect([r.failure?.type, r.failure?.nonRetryable]).toEqual([FailureType.DownloadFailed, true]);
    expect(r.failure?.message).toContain('none of the 2 URLs found in the record is an image');
    expect(r.failure?.message).toContain('urls.get (discovered): HTTP 401');
    expect(r.failure?.message).toContain('links.web (discovered): not an image');
  });

  it('every candidate refused by its host (an expired link): the host status, so the row ends images_unsaved', async () => {
    const s = await host();
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const gone = await runActivity(() =>
      activities.downloadImages(
        input([candidate(`${s.origin}/expired`, 'result.file'), candidate(`${s.origin}/v1/jobs/a1`, 'urls.get')]),
      ),
    );
    expect(gone.failure?.details?.[0]).toMatchObject({ reason: 'no candidate is an image', httpStatus: 401 });
    // One refused here (a web page is no image) would be refused for every row: no host status, the batch stops.
    const page = await runActivity(() =>
      activities.downloadImages(
        input([candidate(`${s.origin}/expired`, 'result.file'), candidate(`${s.origin}/page`, 'links.web')]),
      ),
    );
    expect(page.failure?.details?.[0]).not.toHaveProperty('httpStatus');
  });

  it('none kept and one failed for now (a 503): tried again later, not dropped for good', async () => {
    const s = await host();
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(input([candidate(`${s.origin}/page`, 'a'), candidate(`${s.origin}/busy`, 'b')])),
    );
    expect([r.failure?.type, r.failure?.nonRetryable, r.failure?.nextRetryDelay]).toEqual([
      FailureType.DownloadFailed,
      false,
      3000,
    ]);
  });

  it('an image at a configured path keeps its strictness: a web page there fails the download', async () => {
    const s = await host();
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(
        input([{ url: `${s.origin}/page`, source: 'images[0].url' }, { url: `${s.origin}/artifacts/a1` }]),
      ),
    );
    expect([r.failure?.type, r.failure?.nonRetryable]).toEqual([FailureType.DownloadFailed, true]);
    expect(r.failure?.message).toMatch(/not an image/);
  });

  it('createImage: a record wrapped in data, its image under an unfamiliar name, its cost an amount object', async () => {
    const clock = { t: 1_000_000 };
    let origin = '';
    const s = await startStub((req): StubReply => {
      if (req.method === 'POST') return { status: 202, body: { data: { id: 'a1', status: 'IN_QUEUE' } } };
      if (req.url === '/api/creations/a1') {
        const record = {
          id: 'a1',
          status: 'COMPLETED',
          cost: { amount: '0.04', currency: 'USD' },
          urls: { get: `${origin}/v1/jobs/a1` },
          result: { artifact_location: `${origin}/artifacts/a1` },
        };
        return { status: 200, body: { data: record } };
      }
      if (req.url === '/artifacts/a1') return { status: 302, headers: { location: '/blob/a1' }, body: '' };
      if (req.url === '/blob/a1') {
        return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: PNG };
      }
      return { status: 401, body: { detail: 'no key' } };
    });
    servers.push(s);
    origin = s.origin;
    const { activities } = activitiesFor(`${s.origin}/api`, {}, { outputRoot: out.dir, now: () => clock.t });
    const request = { prompt: 'a fox', model: 'flux-dev' };
    const key = { idempotencyKey: 'ib.b.r.a1', request, batchId: 'b', rowId: 'r', outDir: 'o', maxPollWaitMs: 60_000 };
    let details: unknown;
    for (let n = 0; n < 10; n++) {
      const r = await runActivity(() => activities.createImage(key), { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      if (r.value) {
        expect(r.value).toMatchObject({
          outcome: 'succeeded',
          creationId: 'a1',
          costUsd: 0.04,
          images: [{ source: 'result.artifact_location (discovered)', path: 'r/a1-1.png', bytes: PNG.length }],
        });
        return;
      }
      expect(r.failure?.nonRetryable).toBe(false);
      clock.t += Number(r.failure?.nextRetryDelay ?? 1000);
    }
    throw new Error('createImage never ended');
  });
});
