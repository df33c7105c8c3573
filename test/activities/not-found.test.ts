import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput } from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, driveAttempts } from './helpers';

/**
 * Reads that lag writes: a poll of the key's own creation answered 404 ERR_NOT_FOUND is polled again with backoff
 * (never sooner than the poll interval) within IMAGEGEN_NOT_FOUND_WINDOW_MS of the first 404 of the run, each 404
 * counted; past the window the creation is lost, the message saying for how long it was not found.
 */
let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

const INTERVAL = 2_000;
const notFound: StubReply = {
  status: 404,
  body: { error: { code: 'ERR_NOT_FOUND', message: 'No creation with this id.' } },
};
const running: StubReply = { status: 200, body: { id: 'cr_1', status: 'running' } };
const failed: StubReply = { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } };

function input(extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: 'ib/b/r/a1',
    request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    ...extra,
  };
}

/** A service that accepts, then answers polls from `polls` in turn (the last repeats), noting each poll's time. */
async function service(polls: StubReply[], clock: { t: number }, pollTimes: number[]) {
  let i = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST') return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
    pollTimes.push(clock.t);
    return polls[Math.min(i++, polls.length - 1)]!;
  });
  return stub;
}

describe('createImage: a 404 of its own creation', () => {
  it('is polled again with backoff until found; the 404s are counted in the result', async () => {
    const clock = { t: 1_000_000 };
    const pollTimes: number[] = [];
    const s = await service([notFound, notFound, notFound, running, failed], clock, pollTimes);
    const { activities } = activitiesFor(
      s.url,
      { minPollIntervalMs: INTERVAL, pollPlan: 'interval', backoffBaseMs: 1_000, backoffMaxMs: 8_000 },
      { now: () => clock.t },
    );
    const ended = await driveAttempts(() => activities.createImage(input()), clock);
    expect(ended.value).toMatchObject({ outcome: 'failed', creationId: 'cr_1', notFoundPolls: 3 });
    expect(pollTimes).toHaveLength(5);
    // Each wait after a 404 is a backoff with jitter (half to full of 1 s, 2 s, 4 s), never under the interval.
    const lagWaits = ended.failures.filter((f) => f.message.includes('not found yet')).map((f) => f.delay);
    expect(lagWaits).toEqual([INTERVAL, INTERVAL, 3_000]);
    expect(ended.failures.find((f) => f.message.includes('not found yet'))?.message).toContain(
      "the service's reads may lag its writes",
    );
    // Nothing was submitted again.
    expect(s.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('past the window from the first 404 the key goes again; found nowhere still, it is lost, saying for how long', async () => {
    const clock = { t: 1_000_000 };
    const s = await service([notFound], clock, []);
    const { activities } = activitiesFor(
      s.url,
      { minPollIntervalMs: INTERVAL, notFoundWindowMs: 20_000, backoffBaseMs: 1_000, backoffMaxMs: 4_000 },
      { now: () => clock.t },
    );
    const ended = await driveAttempts(() => activities.createImage(input()), clock);
    expect(ended.failure?.type).toBe(FailureType.CreationNotFound);
    expect(ended.failure?.message).toMatch(/^answered 404 ERR_NOT_FOUND for 2\d s \(\d+ polls\)/);
    expect(ended.failure?.message).toContain('IMAGEGEN_NOT_FOUND_WINDOW_MS 20 s');
    // Past the first window the key went again and the service returned its creation: a second window, then lost.
    expect(ended.failure?.message).toMatch(
      /; its key sent again returned it after it answered 404 ERR_NOT_FOUND for 2\d s/,
    );
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
    const runs = [...(ended.failure?.message ?? '').matchAll(/\((\d+) polls\)/g)].map((m) => Number(m[1]));
    const polls = (ended.failure?.details?.[1] as { notFoundPolls?: number }).notFoundPolls;
    expect(polls).toBe(runs[0]! + runs[1]!);
  });

  it('an answer that shows the creation ends the run: the next 404 starts a window of its own', async () => {
    const clock = { t: 1_000_000 };
    // 404s for 8 s, an in-flight answer, then 404s again for 8 s: neither run reaches the 10 s window.
    const lag = Array.from({ length: 4 }, () => notFound);
    const s = await service([...lag, running, ...lag, failed], clock, []);
    const { activities } = activitiesFor(
      s.url,
      { minPollIntervalMs: INTERVAL, pollPlan: 'interval', notFoundWindowMs: 10_000, backoffMaxMs: 1_000 },
      { now: () => clock.t },
    );
    const ended = await driveAttempts(() => activities.createImage(input()), clock);
    expect(ended.value).toMatchObject({ outcome: 'failed', notFoundPolls: 8 });
  });

  it('with a window of 0, the first 404 sends the key again; returned, a second 404 ends it lost', async () => {
    const clock = { t: 1_000_000 };
    const s = await service([notFound], clock, []);
    const { activities } = activitiesFor(s.url, { notFoundWindowMs: 0 }, { now: () => clock.t });
    const ended = await driveAttempts(() => activities.createImage(input()), clock);
    expect(ended.failure?.type).toBe(FailureType.CreationNotFound);
    expect(ended.failure?.message).toMatch(
      /^answered 404 ERR_NOT_FOUND for 0 s \(1 poll\); its key sent again returned it after it answered 404 ERR_NOT_FOUND for 0 s \(1 poll\)/,
    );
    expect(s.requests.map((r) => r.method)).toEqual(['POST', 'GET', 'POST', 'GET']);
  });
});
