import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterEach, describe, expect, it } from 'vitest';
import { HEARTBEAT_EVERY_MS, currentDetails, heartbeat, whileHeartbeating } from '../../src/activities/heartbeat';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/** Runs `fn` as an activity whose previous attempt left `details`; records every heartbeat with its time. */
async function inActivity<T>(fn: (ctx: Context, elapsed: () => number) => Promise<T>, details?: unknown) {
  const env = new MockActivityEnvironment(details === undefined ? {} : { heartbeatDetails: details }, {
    logger: new DefaultLogger('ERROR'),
  });
  const beats: { at: number; details: unknown }[] = [];
  const t0 = Date.now();
  env.on('heartbeat', (d: unknown) => beats.push({ at: Date.now() - t0, details: d }));
  const outcome = await env
    .run(() => fn(Context.current(), () => Date.now() - t0))
    .then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
  return { outcome, beats, settledAt: Date.now() - t0 };
}

describe('whileHeartbeating', () => {
  it('heartbeats the previous attempt’s details while the work is pending, and stops when it settles', async () => {
    const prior = { ambiguousTries: 2 };
    const { outcome, beats, settledAt } = await inActivity(
      (ctx) =>
        whileHeartbeating(
          ctx,
          sleep(230).then(() => 'done'),
          50,
        ),
      prior,
    );
    expect(outcome).toEqual({ value: 'done' });
    expect(beats.length).toBeGreaterThanOrEqual(2);
    // Every periodic heartbeat carries what the previous attempt left: an empty one would erase it.
    for (const b of beats) expect(b.details).toEqual(prior);
    expect(Math.max(...beats.map((b) => b.at))).toBeLessThanOrEqual(settledAt);
  });

  it('sends no heartbeat after the work has settled', async () => {
    const { outcome, beats } = await inActivity(async (ctx, elapsed) => {
      await whileHeartbeating(ctx, sleep(120), 30);
      const returnedAt = elapsed();
      await sleep(150); // five more intervals: none may beat
      return returnedAt;
    });
    const returnedAt = (outcome as { value: number }).value;
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats.filter((b) => b.at > returnedAt)).toEqual([]);
  });

  it('carries the latest details this attempt set, and passes a rejection through', async () => {
    const { outcome, beats } = await inActivity(
      async (ctx) => {
        heartbeat(ctx, { ambiguousTries: 3 });
        expect(currentDetails(ctx)).toEqual({ ambiguousTries: 3 });
        await whileHeartbeating(
          ctx,
          sleep(150).then(() => Promise.reject(new Error('the request failed'))),
          40,
        );
      },
      { ambiguousTries: 2 },
    );
    expect(outcome).toMatchObject({ error: { message: 'the request failed' } });
    expect(beats.length).toBeGreaterThanOrEqual(3);
    for (const b of beats) expect(b.details).toEqual({ ambiguousTries: 3 });
  });
});

describe('the image activities heartbeat while a request is in flight', () => {
  let server: StubServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('submitCreation held longer than the heartbeat interval heartbeats, keeping the count of unknown outcomes', async () => {
    const holdMs = HEARTBEAT_EVERY_MS + 1_500;
    server = await startStub(async () => {
      await sleep(holdMs);
      return { status: 202, body: { id: 'cr_slow', status: 'queued', cost_usd: 0.04 } };
    });
    const { activities } = activitiesFor(server.url, { headersTimeoutMs: 60_000 });
    const input = { idempotencyKey: 'b1-r1-1', request: { prompt: 'a fox', model: 'flux-dev' } };
    const r = await runActivity(() => activities.submitCreation(input), { heartbeatDetails: { ambiguousTries: 2 } });
    expect(r.value).toMatchObject({ creationId: 'cr_slow' });
    expect(r.heartbeats.length).toBeGreaterThanOrEqual(1);
    expect(r.heartbeats.every((d) => JSON.stringify(d) === JSON.stringify({ ambiguousTries: 2 }))).toBe(true);
  }, 30_000);
});
