import { inflateSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ErrorCode, FailureMessage, StatusNaming } from '../../src/api/contract';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import {
  call,
  expectError,
  expectChargesConsistent,
  expectRetryAfter,
  OTHER_ACCOUNT_KEY,
  PROMPT,
  SECOND_KEY,
  startTestSim,
  submit,
} from './helpers';

let sim: Simulator;
afterEach(async () => {
  expectChargesConsistent(sim);
  await sim.close();
});

describe('creation lifecycle on the injected clock', () => {
  it.each(['default', 'alternate'] as const)('goes queued, running, succeeded in the %s naming', async (naming) => {
    const { sim: s, clock } = await startTestSim({ statusNaming: naming });
    sim = s;
    const names = StatusNaming[naming];
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev', num_images: 2 });
    expect(accepted.body.status).toBe(names.queued);
    const id = accepted.body.id;
    const seen: string[] = [];
    for (const step of [0, 2000, 2500]) {
      clock.advance(step);
      const polled = await call(sim, 'GET', `/creations/${id}`);
      expect(polled.status).toBe(200);
      seen.push(polled.body.status);
    }
    expect(seen).toEqual([names.queued, names.running, names.succeeded]);
    const done = await call(sim, 'GET', `/creations/${id}`, { key: SECOND_KEY }).then(async (r) => {
      expect(r.status).toBe(429); // polled a moment ago through the other key: interval is per creation
      clock.advance(2000);
      return call(sim, 'GET', `/creations/${id}`);
    });
    expect(done.body.images).toHaveLength(2);
    expect(done.body).not.toHaveProperty('error');
    expect(done.body.updated_at).not.toBe(done.body.created_at);
  });

  it('switches naming at run time', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    const { body } = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    sim.setStatusNaming('alternate');
    clock.advance(10_000);
    expect((await call(sim, 'GET', `/creations/${body.id}`)).body.status).toBe('completed');
  });

  it('min poll interval: 429 ERR_RATE_LIMIT with Retry-After = time left rounded up', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    const { body } = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expect((await call(sim, 'GET', `/creations/${body.id}`)).status).toBe(200);
    clock.advance(300);
    const early = await call(sim, 'GET', `/creations/${body.id}`);
    expectError(early, 429, ErrorCode.RateLimit);
    expect(early.body.error.details).toMatchObject({ scope: 'creation', reason: 'min_poll_interval' });
    expect(expectRetryAfter(early)).toBe(2); // 1.7 s left
    clock.advance(1600);
    expect(expectRetryAfter(await call(sim, 'GET', `/creations/${body.id}`))).toBe(1); // 0.1 s left
    clock.advance(100);
    expect((await call(sim, 'GET', `/creations/${body.id}`)).status).toBe(200);
  });

  it('404 ERR_NOT_FOUND for unknown ids and for another account’s ids alike', async () => {
    ({ sim } = await startTestSim());
    const { body } = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    const unknown = await call(sim, 'GET', '/creations/cr_00000000000000000000000000');
    const foreign = await call(sim, 'GET', `/creations/${body.id}`, { key: OTHER_ACCOUNT_KEY });
    const garbage = await call(sim, 'GET', '/creations/%E0%A4%A');
    for (const reply of [unknown, foreign, garbage]) expectError(reply, 404, ErrorCode.NotFound);
    expect(Object.keys(foreign.body.error)).toEqual(Object.keys(unknown.body.error));
  });

  it('serves real, deterministic PNGs from the files port without a key, and records what arrived there', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    const { body } = await submit(sim, { prompt: PROMPT, model: 'flux-dev', seed: 42, width: 1024, height: 512 });
    const tooEarly = await request(`${sim.filesUrl}/files/${body.id}-0.png`);
    expect(tooEarly.statusCode).toBe(404);
    await tooEarly.body.dump();
    clock.advance(10_000);
    const done = await call(sim, 'GET', `/creations/${body.id}`);
    const url = done.body.images[0]?.url ?? '';
    expect(url.startsWith(`${sim.filesUrl}/files/`)).toBe(true);
    const first = await request(url);
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toBe('image/png');
    const png = Buffer.from(await first.body.arrayBuffer());
    const again = Buffer.from(await (await request(url)).body.arrayBuffer());
    expect(again.equals(png)).toBe(true);
    // A valid PNG: signature, IHDR 64x32 RGB, an IDAT that inflates to (64*3+1)*32 bytes.
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(png.readUInt32BE(16)).toBe(64);
    expect(png.readUInt32BE(20)).toBe(32);
    const idatLength = png.readUInt32BE(33);
    expect(png.subarray(37, 41).toString()).toBe('IDAT');
    expect(inflateSync(png.subarray(41, 41 + idatLength)).length).toBe((64 * 3 + 1) * 32);
    const missing = await request(`${sim.filesUrl}/files/${body.id}-1.png`);
    expect(missing.statusCode).toBe(404);
    await missing.body.dump();
    const seen = sim.filesRequests();
    expect(seen.length).toBe(4);
    for (const r of seen) {
      expect(r.headers.authorization).toBeUndefined();
      expect(r.headers['x-api-key']).toBeUndefined();
      expect(JSON.stringify(r.headers)).not.toContain(DEMO_API_KEY);
    }
  });

  it('a failed creation shows one of the four strings and is refunded in the charge book', async () => {
    const { sim: s, clock } = await startTestSim({ safety: { triggerWords: ['forbidden'] } });
    sim = s;
    const { body } = await submit(sim, { prompt: 'a forbidden scene in detail', model: 'flux-dev' });
    expect(sim.walletUsd('acct_demo')).toBeCloseTo(99.96, 10);
    clock.advance(10_000);
    const failed = await call(sim, 'GET', `/creations/${body.id}`);
    expect(failed.body).toMatchObject({ status: 'failed', error: FailureMessage.SafetyFilter, images: [] });
    expect(sim.walletUsd('acct_demo')).toBe(100);
    expect(sim.charges.creation(body.id)).toMatchObject({
      outcome: 'failed',
      chargedUsd: 0.04,
      refundedUsd: 0.04,
      netUsd: 0,
    });
    const refund = sim.charges.entries().find((e) => e.kind === 'refund');
    expect(refund?.at).toBe(clock.now() - 10_000 + 4000); // at the finish time, not at the read
  });
});

describe('real-time mode', () => {
  it('runs on the system clock with the sweeper, and closes cleanly', async () => {
    sim = await startSimulator({
      sweepIntervalMs: 10,
      generation: { queuedMs: { minMs: 5, maxMs: 5 }, runningMs: { minMs: 20, maxMs: 20 } },
      safety: { triggerWords: ['[unsafe]'] },
    });
    const ok = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    const bad = await submit(sim, { prompt: `${PROMPT} [unsafe]`, model: 'flux-dev' });
    await new Promise((r) => setTimeout(r, 100));
    expect(sim.stats().inFlight).toBe(0);
    expect((await call(sim, 'GET', `/creations/${ok.body.id}`)).body.status).toBe('succeeded');
    expect((await call(sim, 'GET', `/creations/${bad.body.id}`)).body.error).toBe(FailureMessage.SafetyFilter);
    expect(sim.walletUsd('acct_demo')).toBeCloseTo(99.96, 10);
  });
});
