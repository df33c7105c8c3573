import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, QUEUE_SERVICE_PROFILE, type Simulator } from '../../src/simulator';
import { renderImage } from '../../src/simulator/png';
import { call, expectChargesConsistent, PROMPT, startTestSim, submit } from './helpers';

/**
 * The queue-service profile: an independent service written to the interface, as a tester met it. Its records are
 * wrapped in `data`, the image URL sits one level down under a name no list holds (`result.artifact_location`), beside
 * a link to a web page; the cost is `{ amount: "0.04", currency: "USD" }`; the URL answers with a redirect to the file,
 * served as `application/octet-stream`, which expires 20 s after the creation ended.
 */

const running: Simulator[] = [];
afterEach(async () => {
  for (const sim of running.splice(0)) {
    expectChargesConsistent(sim);
    await sim.close();
  }
});

async function get(url: string) {
  const res = await request(url, { method: 'GET' });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

describe('the queue-service profile', () => {
  it('wraps the record in data, puts the image under result.artifact_location, the cost as an amount object', async () => {
    const { sim, clock } = await startTestSim(QUEUE_SERVICE_PROFILE, new ManualClock());
    running.push(sim);
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev', width: 512, height: 256 });
    expect(accepted.status).toBe(202);
    const queued = accepted.body as unknown as { data: Record<string, unknown> };
    expect(Object.keys(accepted.body)).toEqual(['data']);
    expect(queued.data).toMatchObject({ status: 'queued', cost: { amount: '0.04', currency: 'USD' } });
    expect(queued.data).not.toHaveProperty('result');
    const id = String(queued.data.id);

    clock.advance(10_000);
    const done = await call(sim, 'GET', `/creations/${id}`);
    const record = (done.body as unknown as { data: Record<string, unknown> }).data;
    expect(record).toMatchObject({ id, status: 'succeeded', cost: { amount: '0.04', currency: 'USD' } });
    expect(record).not.toHaveProperty('images');
    expect(record).not.toHaveProperty('cost_usd');
    const url = (record.result as { artifact_location: string }).artifact_location;
    expect(url.startsWith(sim.filesUrl)).toBe(true);
    const page = (record.links as { web: string }).web;
    expect((await get(page)).headers['content-type']).toMatch(/^text\/html/);

    // The URL redirects to the file, served as octet-stream: the PNG of the prompt and seed.
    const first = await get(url);
    expect(first.status).toBe(302);
    const file = await get(new URL(String(first.headers.location), url).toString());
    expect([file.status, file.headers['content-type']]).toEqual([200, 'application/octet-stream']);
    expect(file.body.equals(renderImage(PROMPT, Number(record.seed), 0, 32, 16))).toBe(true);
  });

  it('the file expires (410) expireAfterMs after the creation ended, by the redirect and the file alike', async () => {
    const { sim, clock } = await startTestSim(QUEUE_SERVICE_PROFILE, new ManualClock());
    running.push(sim);
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    const id = String((accepted.body as unknown as { data: { id: string } }).data.id);
    clock.advance(4_000); // queued 1 s, running 3 s: it ends now
    const record = (await call(sim, 'GET', `/creations/${id}`)).body as unknown as {
      data: { result: { artifact_location: string } };
    };
    const url = record.data.result.artifact_location;
    const location = new URL(String((await get(url)).headers.location), url).toString();
    clock.advance(QUEUE_SERVICE_PROFILE.files!.expireAfterMs! - 1);
    expect((await get(location)).status).toBe(200);
    clock.advance(1);
    expect((await get(url)).status).toBe(410);
    expect((await get(location)).status).toBe(410);
    expect(QUEUE_SERVICE_PROFILE.files!.expireAfterMs).toBe(20_000);
  });
});
