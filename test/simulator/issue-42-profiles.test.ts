import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, PASSING_STATUS_PROFILE, POLL_HINT_PROFILE, type Simulator } from '../../src/simulator';
import { call, expectChargesConsistent, expectError, expectRetryAfter, PROMPT, startTestSim, submit } from './helpers';

/**
 * Issue #42's service as the simulator's profiles copy it: a status outside every set that passes between running
 * and success, on records that carry the API's own links and a logs URL served as text; and a minimum poll interval
 * longer than imagebatch's default, with a Retry-After on every answer to a poll of a creation still in flight.
 */

const running: Simulator[] = [];
afterEach(async () => {
  for (const sim of running.splice(0)) {
    expectChargesConsistent(sim);
    await sim.close();
  }
});

describe('the passing-status profile', () => {
  it('shows "uploading" over the last 1.5 s of the running time, with links that are no image', async () => {
    // queued 1 s, running 3 s (startTestSim's timing): uploading from 2.5 s to 4 s after acceptance.
    const { sim, clock } = await startTestSim(
      { ...PASSING_STATUS_PROFILE, limits: { minPollIntervalMs: 0 } },
      new ManualClock(),
    );
    running.push(sim);
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    const id = accepted.body.id;
    const statusAt = async (ms: number) => {
      clock.advance(ms);
      const reply = await call(sim, 'GET', `/creations/${id}`);
      return reply.body as unknown as Record<string, unknown> & { status: string };
    };
    expect((await statusAt(2_000)).status).toBe('running');
    const passing = await statusAt(600);
    expect(passing).toMatchObject({ status: 'uploading', images: [] });
    const links = passing as unknown as { urls: { get: string; cancel: string }; logs: string };
    expect(links.urls).toEqual({
      get: `${sim.baseUrl}/creations/${id}`,
      cancel: `${sim.baseUrl}/creations/${id}/cancel`,
    });
    expect(links.logs).toBe(`${sim.filesUrl}/logs/${id}.txt`);
    const done = await statusAt(1_400);
    expect(done).toMatchObject({ status: 'succeeded', logs: links.logs });
    expect((done as unknown as { images: unknown[] }).images).toHaveLength(1);

    // The logs are text; the API's own link wants the key.
    const logs = await request(links.logs);
    expect([logs.statusCode, logs.headers['content-type']]).toEqual([200, 'text/plain; charset=utf-8']);
    expect(await logs.body.text()).toContain(`${id}: running`);
    const get = await request(links.urls.get);
    await get.body.dump();
    expect(get.statusCode).toBe(401);
  });
});

describe('the poll-hint profile', () => {
  it('answers an in-flight poll with Retry-After: 3, a poll 2 s later with a 429, and counts both', async () => {
    const { sim, clock } = await startTestSim(POLL_HINT_PROFILE, new ManualClock());
    running.push(sim);
    const id = (await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).body.id;
    const first = await call(sim, 'GET', `/creations/${id}`);
    expect([first.status, first.body.status, expectRetryAfter(first)]).toEqual([200, 'queued', 3]);
    clock.advance(2_000);
    const early = await call(sim, 'GET', `/creations/${id}`);
    expectError(early, 429, 'ERR_RATE_LIMIT');
    expect(early.body.error.details).toMatchObject({ reason: 'min_poll_interval', min_interval_ms: 3_000 });
    clock.advance(1_000);
    expect((await call(sim, 'GET', `/creations/${id}`)).status).toBe(200);
    clock.advance(3_000);
    const ended = await call(sim, 'GET', `/creations/${id}`);
    // An ended creation's answer carries no hint: there is nothing more to poll for.
    expect([ended.body.status, ended.headers['retry-after']]).toEqual(['succeeded', undefined]);
    expect(sim.stats()).toMatchObject({ polls: 4, pollsTooSoon: 1 });
  });
});
