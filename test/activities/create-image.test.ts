import { ApplicationFailureCategory } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput, type CreateImageResult } from '../../src/model';
import { UNRECOGNIZED_NOT_FOUND_LIMIT } from '../../src/activities/image-activities';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';
import { PollPlan } from '../../src/api/poll-plan';

/**
 * createImage, one key from submission to the creation's end, driven attempt by attempt as Temporal would: each
 * retry after the failure's `nextRetryDelay` on a fake clock, with the previous attempt's last heartbeat details.
 * The stub service records, on the same clock, when each poll reached it.
 */
let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

const MIN_INTERVAL = 2_000;

function input(extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: 'ib.b.r.a1',
    request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    ...extra,
  };
}

/** A service whose polls answer from `polls` in turn (the last one repeats), recording each poll's clock time. */
async function service(polls: StubReply[], clock: { t: number }, pollTimes: number[]) {
  let i = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST') return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
    pollTimes.push(clock.t);
    return polls[Math.min(i++, polls.length - 1)]!;
  });
  return stub;
}

/** Runs attempts until one returns or fails for good (at most `max`), as Temporal's retries would. */
async function drive(
  run: () => Promise<CreateImageResult>,
  clock: { t: number },
  options: { max?: number; firstDetails?: unknown; retryAfterZero?: boolean } = {},
) {
  let details: unknown = options.firstDetails;
  const failures: { type?: string | null | undefined; delay: number; local: boolean; benign: boolean }[] = [];
  for (let n = 0; n < (options.max ?? 40); n++) {
    const r = await runActivity(run, details === undefined ? {} : { heartbeatDetails: details });
    details = r.heartbeats.at(-1) ?? details;
    if (r.value) return { value: r.value, failures, details };
    const f = r.failure!;
    if (f.nonRetryable) return { failure: f, failures, details };
    const delay = typeof f.nextRetryDelay === 'number' ? f.nextRetryDelay : 1_000;
    const local = (f.details?.[0] as { local?: boolean } | null)?.local === true;
    failures.push({ type: f.type, delay, local, benign: f.category === ApplicationFailureCategory.BENIGN });
    clock.t += options.retryAfterZero ? 0 : delay;
  }
  throw new Error('createImage never ended');
}

describe('createImage', () => {
  it('submits once, polls no faster than the interval, and ends with the creation and its cost', async () => {
    const clock = { t: 1_000_000 };
    const pollTimes: number[] = [];
    const s = await service(
      [
        { status: 200, body: { id: 'cr_1', status: 'running' } },
        { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.', cost_usd: 0.04 } },
      ],
      clock,
      pollTimes,
    );
    const { activities } = activitiesFor(s.url, { minPollIntervalMs: MIN_INTERVAL }, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    // (The limit that bound is another test's: the mock's attempts start late, as behind a task queue's limit.)
    expect({ ...ended.value, limit: undefined }).toEqual({
      outcome: 'failed',
      creationId: 'cr_1',
      costUsd: 0.04,
      error: 'Generation failed.',
      retryable: true,
    });
    expect(s.requests.filter((q) => q.method === 'POST')).toHaveLength(1);
    // The acceptance and the in-flight poll are expected flow control: benign, so the SDK logs them at DEBUG and
    // the terminal stays quiet.
    expect(ended.failures.map((f) => [f.type, f.benign])).toEqual([
      [FailureType.Pending, true],
      [FailureType.Pending, true],
    ]);
    expect(pollTimes).toHaveLength(2);
    expect(pollTimes[1]! - pollTimes[0]!).toBeGreaterThanOrEqual(MIN_INTERVAL);
  });

  it('no poll goes out sooner than the minimum interval after the previous one, whatever came between', async () => {
    const clock = { t: 1_000_000 };
    const pollTimes: number[] = [];
    // An unknown outcome (500), a Retry-After of 0, an answer with no JSON: each retried quickly by its own rule.
    const s = await service(
      [
        { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'boom' } } },
        { status: 429, headers: { 'retry-after': '0' }, body: { error: { code: 'ERR_RATE_LIMIT', message: 'slow' } } },
        { status: 200, body: 'not json' },
        { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } },
      ],
      clock,
      pollTimes,
    );
    const { activities } = activitiesFor(
      s.url,
      { minPollIntervalMs: MIN_INTERVAL, backoffBaseMs: 100 },
      {
        now: () => clock.t,
      },
    );
    const ended = await drive(() => activities.createImage(input()), clock);
    expect(ended.value?.outcome).toBe('failed');
    expect(pollTimes).toHaveLength(4);
    const gaps = pollTimes.slice(1).map((t, i) => t - pollTimes[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(MIN_INTERVAL);
    // The waits that kept them apart were the activity's own, sent nothing, and said so.
    expect(ended.failures.some((f) => f.local)).toBe(true);
  });

  it('the interval holds across a worker restart too: the last poll time travels in heartbeat details', async () => {
    const clock = { t: 1_000_000 };
    const pollTimes: number[] = [];
    const s = await service(
      [{ status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } }],
      clock,
      pollTimes,
    );
    const { activities } = activitiesFor(s.url, { minPollIntervalMs: MIN_INTERVAL }, { now: () => clock.t });
    const r = await runActivity(() => activities.createImage(input()), {
      heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 10_000, lastPollAtMs: clock.t - 500 },
    });
    expect(r.failure?.type).toBe(FailureType.RateLimited);
    expect(r.failure?.nextRetryDelay).toBe(1_500);
    expect(pollTimes).toHaveLength(0);
  });

  it('404 polls without ERR_NOT_FOUND are unknown outcomes; a run of them stops the batch, naming IMAGEGEN_CREATION_PATH', async () => {
    const clock = { t: 1_000_000 };
    const pollTimes: number[] = [];
    const s = await service([{ status: 404, body: '<html><body>Not Found</body></html>' }], clock, pollTimes);
    const { activities } = activitiesFor(s.url, { minPollIntervalMs: MIN_INTERVAL }, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    expect(ended.failure?.type).toBe(FailureType.BatchStop);
    expect(ended.failure?.message).toContain('IMAGEGEN_CREATION_PATH');
    expect(ended.failure?.details?.[0]).toMatchObject({ reason: 'creation_path_not_found', httpStatus: 404 });
    // Its creation and cost are kept: after the resume the row polls the same creation, never submits again.
    expect(ended.failure?.details?.[1]).toMatchObject({ creationId: 'cr_1', costUsd: 0.04 });
    expect(pollTimes).toHaveLength(UNRECOGNIZED_NOT_FOUND_LIMIT);
    expect(ended.failures.filter((f) => f.type === FailureType.Ambiguous)).toHaveLength(
      UNRECOGNIZED_NOT_FOUND_LIMIT - 1,
    );
  });

  it('a 404 with ERR_NOT_FOUND is a lost creation, its id and cost kept', async () => {
    const clock = { t: 1_000_000 };
    const s = await service(
      [{ status: 404, body: { error: { code: 'ERR_NOT_FOUND', message: 'no such creation' } } }],
      clock,
      [],
    );
    const { activities } = activitiesFor(s.url, {}, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    expect(ended.failure?.type).toBe(FailureType.CreationNotFound);
    expect(ended.failure?.details?.[1]).toMatchObject({ creationId: 'cr_1', costUsd: 0.04 });
  });

  it('a creation still running at the maximum wait ends with MaxWait, its id and cost kept', async () => {
    const clock = { t: 1_000_000 };
    const s = await service([{ status: 200, body: { id: 'cr_1', status: 'running' } }], clock, []);
    const { activities } = activitiesFor(s.url, {}, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input({ maxPollWaitMs: 60_000 })), clock);
    expect(ended.failure?.type).toBe(FailureType.MaxWait);
    expect(ended.failure?.details?.[1]).toMatchObject({ creationId: 'cr_1', costUsd: 0.04 });
    // The service's last answer, for the row's record.
    const first = ended.failure?.details?.[0] as { maxPollWaitMs?: number; lastAnswer?: string } | undefined;
    expect(first?.maxPollWaitMs).toBe(60_000);
    expect(first?.lastAnswer).toContain('running');
  });

  it('a row that waited out a batch stop longer than the maximum wait still polls its creation once', async () => {
    const clock = { t: 10_000_000 };
    const pollTimes: number[] = [];
    const s = await service(
      [{ status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } }],
      clock,
      pollTimes,
    );
    const { activities } = activitiesFor(s.url, {}, { now: () => clock.t });
    const stale = { creationId: 'cr_1', acceptedAtMs: clock.t - 3_600_000, lastPollAtMs: clock.t - 3_000_000 };
    const ended = await drive(() => activities.createImage(input({ maxPollWaitMs: 60_000, progress: stale })), clock);
    expect(ended.value).toMatchObject({ outcome: 'failed', creationId: 'cr_1' });
    expect(pollTimes).toHaveLength(1);
    expect(s.requests.filter((q) => q.method === 'POST')).toHaveLength(0);
  });

  it('a paid success whose image is not an image stops the batch (images refused), its creation and cost kept', async () => {
    const clock = { t: 1_000_000 };
    const origin = () => stub!.origin;
    stub = await startStub((req) => {
      if (req.method === 'POST') return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
      if (req.url.startsWith('/files/')) {
        return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: 'x' };
      }
      return { status: 200, body: { id: 'cr_1', status: 'succeeded', images: [{ url: `${origin()}/files/cr_1-0` }] } };
    });
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    // Every row's image would be refused as this one's: the batch stops, the row keeps its creation for a resume.
    expect(ended.failure?.type).toBe(FailureType.BatchStop);
    expect(ended.failure?.nonRetryable).toBe(true);
    expect(ended.failure?.details?.[0]).toMatchObject({ reason: 'images_refused', httpStatus: 0 });
    expect(ended.failure?.message).toContain('not an image');
    expect(ended.failure?.details?.[1]).toMatchObject({ creationId: 'cr_1', costUsd: 0.04, generated: true });
  });

  it('a paid success whose images were not saved keeps the cost its record showed (the 202 said none)', async () => {
    const clock = { t: 1_000_000 };
    const origin = () => stub!.origin;
    const cost = { amount: '0.04', currency: 'USD' };
    stub = await startStub((req) => {
      if (req.method === 'POST') return { status: 202, body: { data: { id: 'cr_1', status: 'queued' } } };
      if (req.url.startsWith('/files/')) return { status: 404, body: 'gone' };
      const images = [{ url: `${origin()}/files/cr_1-0` }];
      return { status: 200, body: { data: { id: 'cr_1', status: 'succeeded', cost, images } } };
    });
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    expect(ended.failure?.type).toBe(FailureType.DownloadFailed);
    expect(ended.failure?.nonRetryable).toBe(true);
    expect(ended.failure?.details?.[1]).toMatchObject({ creationId: 'cr_1', costUsd: 0.04, generated: true });
  });

  it("an image host's own words that hold the key (a content type, a redirect's location) reach no failure", async () => {
    const clock = { t: 1_000_000 };
    const origin = () => stub!.origin;
    const leaked = Buffer.from(`Bearer ${SECRET_KEY}`).toString('base64');
    stub = await startStub((req) => {
      if (req.method === 'POST') return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
      if (req.url.startsWith('/files/')) {
        return { status: 200, headers: { 'content-type': `text/plain; echo=${SECRET_KEY}; b=${leaked}` }, body: 'x' };
      }
      return { status: 200, body: { id: 'cr_1', status: 'succeeded', images: [{ url: `${origin()}/files/cr_1-0` }] } };
    });
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    const ended = await drive(() => activities.createImage(input()), clock);
    expect(ended.failure?.message).toContain('not an image');
    const kept = JSON.stringify({ message: ended.failure?.message, details: ended.failure?.details });
    expect(kept).not.toContain(SECRET_KEY);
    expect(kept).not.toContain(SECRET_KEY.slice(-40));
    expect(kept).not.toContain(leaked.slice(8, 40));
    expect(kept).toContain('[REDACTED]');
  });

  describe('with the poll plan', () => {
    const running = { status: 200, body: { id: 'cr_1', status: 'running' } };
    const done = { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } };

    it("learns an explorer's generation time, then polls the next creation once, at that time, when the rate binds", async () => {
      const clock = { t: 1_000_000 };
      const pollTimes: number[] = [];
      const plan = new PollPlan({ minSamples: 1 });
      const s = await service([running, running, done], clock, pollTimes);
      const { activities } = activitiesFor(
        s.url,
        { minPollIntervalMs: MIN_INTERVAL, pollPlan: 'learn' },
        { now: () => clock.t, pollPlan: plan },
      );
      // The first creation is an explorer: polled at the interval, found ended at its third poll (6 s).
      const explorer = await drive(() => activities.createImage(input()), clock);
      expect(explorer.details).toMatchObject({ pollExplore: true });
      expect(explorer.failures.map((f) => f.delay)).toEqual([MIN_INTERVAL, MIN_INTERVAL, MIN_INTERVAL]);
      // The next one, with the rate binding (the mock's attempts start long after they were due: the task queue's
      // limiter), waits out the learnt 6 s and polls once.
      pollTimes.length = 0;
      await s.close();
      const s2 = await service([done], clock, pollTimes);
      const next = activitiesFor(
        s2.url,
        { minPollIntervalMs: MIN_INTERVAL, pollPlan: 'learn' },
        { now: () => clock.t, pollPlan: plan },
      );
      const planned = await drive(() => next.activities.createImage(input({ idempotencyKey: 'ib.b.r.a2' })), clock);
      expect(planned.details).toMatchObject({ pollExplore: false });
      expect(planned.failures.map((f) => f.delay)).toEqual([3 * MIN_INTERVAL]);
      expect(pollTimes).toHaveLength(1);
      // IMAGEGEN_POLL_PLAN=interval: the same plan, unused: the first poll at the interval, nothing learnt or chosen.
      await s2.close();
      const s3 = await service([done], clock, []);
      const fixed = activitiesFor(
        s3.url,
        { minPollIntervalMs: MIN_INTERVAL, pollPlan: 'interval' },
        { now: () => clock.t, pollPlan: plan },
      );
      const r = await runActivity(() => fixed.activities.createImage(input({ idempotencyKey: 'ib.b.r.a4' })));
      expect(r.failure?.nextRetryDelay).toBe(MIN_INTERVAL);
      expect(r.heartbeats.at(-1)).not.toHaveProperty('pollExplore');
    });

    it('polls early when the rate does not bind (attempts start when due), and signals a quota 429 as the quota', async () => {
      const clock = { t: 1_000_000 };
      const plan = new PollPlan({ minSamples: 1 });
      plan.observe('flux-dev', 6_000);
      const s = await service([done], clock, []);
      const { activities } = activitiesFor(
        s.url,
        { minPollIntervalMs: MIN_INTERVAL, pollPlan: 'learn' },
        { now: () => clock.t, pollPlan: plan },
      );
      const onTime = { currentAttemptScheduledTimestampMs: clock.t };
      const r = await runActivity(() => activities.createImage(input()), onTime);
      expect(plan.regime(clock.t)).toBe('open');
      // A retry that starts late is no sign of the queue's limit (a retry timer alone starts late); only a first
      // attempt's lag is.
      const late = { currentAttemptScheduledTimestampMs: clock.t - 60_000 };
      const known = { creationId: 'cr_1', acceptedAtMs: clock.t - 10_000, lastPollAtMs: clock.t - 10_000 };
      await runActivity(() => activities.createImage(input()), { ...late, attempt: 2, heartbeatDetails: known });
      expect(plan.regime(clock.t)).toBe('open');
      // The plan's low quantile of one 6 s time is 6 s; not the rate's, but no sooner than the interval either.
      expect(r.failure?.nextRetryDelay).toBe(6_000);
      await s.close();
      stub = await startStub(() => ({
        status: 429,
        headers: { 'retry-after': '1' },
        body: { error: { code: 'ERR_QUOTA_EXCEEDED', message: 'busy', details: { scope: 'account' } } },
      }));
      const quota = activitiesFor(stub.url, { pollPlan: 'learn' }, { now: () => clock.t, pollPlan: plan });
      await runActivity(() => quota.activities.createImage(input({ idempotencyKey: 'ib.b.r.a3' })), onTime);
      expect(plan.regime(clock.t)).toBe('concurrency');
    });
  });

  it('says, polling at the interval too, which limit bound the worker when the key ended: for the batch progress', async () => {
    const clock = { t: 1_000_000 };
    const plan = new PollPlan();
    const done = { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } };
    const tooMany = (code: string, details: object) => ({
      status: 429,
      headers: { 'retry-after': '1' },
      body: { error: { code, message: 'slow down', details } },
    });
    let first: StubReply | undefined;
    stub = await startStub((req) => {
      if (req.method !== 'POST') return done;
      const reply = first ?? { status: 202, body: { id: 'cr_1', status: 'queued' } };
      first = undefined;
      return reply;
    });
    const worker = (taskQueueRateLimited: boolean) =>
      activitiesFor(
        stub!.url,
        { minPollIntervalMs: MIN_INTERVAL, pollPlan: 'interval' },
        { now: () => clock.t, pollPlan: plan, taskQueueRateLimited },
      ).activities;
    let activities = worker(true);
    /** One key to its end, attempt by attempt; the first one started `scheduledLateMs` after it was due. */
    const attempts = async (
      n: number,
      options: { firstReply?: StubReply; scheduledLateMs?: number; firstAttemptOnly?: boolean } = {},
      from: { attempt: number; heartbeatDetails: unknown } = { attempt: 1, heartbeatDetails: undefined },
    ) => {
      first = options.firstReply;
      let heartbeatDetails: unknown = from.heartbeatDetails;
      for (let attempt = from.attempt; attempt < 10; attempt++) {
        const late = attempt === 1 ? (options.scheduledLateMs ?? 0) : 0;
        const info = { attempt, currentAttemptScheduledTimestampMs: clock.t - late, heartbeatDetails };
        const r = await runActivity(() => activities.createImage(input({ idempotencyKey: `ib.b.r.a${n}` })), info);
        if (r.value) return r.value;
        heartbeatDetails = r.heartbeats.at(-1) ?? heartbeatDetails;
        if (options.firstAttemptOnly) return { attempt: attempt + 1, heartbeatDetails };
        clock.t += typeof r.failure?.nextRetryDelay === 'number' ? r.failure.nextRetryDelay : 1_000;
      }
      throw new Error(`key ${n} never ended`);
    };
    type Ended = Awaited<ReturnType<typeof activities.createImage>>;
    const key = async (n: number, options: { firstReply?: StubReply; scheduledLateMs?: number } = {}) =>
      (await attempts(n, options)) as Ended;
    /** Three keys whose first attempts start late, a second apart (as rows in flight together do); their limits. */
    const lateKeys = async (from: number) => {
      const begun: { attempt: number; heartbeatDetails: unknown }[] = [];
      for (let n = from; n < from + 3; n++) {
        const state = await attempts(n, { scheduledLateMs: 5_000, firstAttemptOnly: true });
        if (!('attempt' in state)) throw new Error(`key ${n} ended in its first attempt`);
        begun.push(state);
        clock.t += 1_000;
      }
      const limits: (string | undefined)[] = [];
      for (const [i, state] of begun.entries()) limits.push(((await attempts(from + i, {}, state)) as Ended).limit);
      return limits;
    };
    expect((await key(1)).limit).toBe('open');
    expect((await key(2, { firstReply: tooMany('ERR_RATE_LIMIT', {}) })).limit).toBe('rate');
    clock.t += 60_000; // the worker forgets a limit after half a minute
    expect((await key(3)).limit).toBe('open');
    // Held in the task queue, second after second (a lag that lasts, not a burst): by its rate limit (set under the
    // key's rate), the key's rate; else busy workers, no limit of the service.
    expect(await lateKeys(40)).toEqual(['rate', 'rate', 'rate']);
    clock.t += 60_000;
    activities = worker(false);
    expect(await lateKeys(60)).toEqual(['open', 'open', 'open']);
    // One late start alone is a burst: no limit.
    clock.t += 60_000;
    activities = worker(true);
    expect((await key(70, { scheduledLateMs: 5_000 })).limit).toBe('open');
    const quota = tooMany('ERR_QUOTA_EXCEEDED', { scope: 'account', reason: 'concurrency_limit' });
    expect((await key(5, { firstReply: quota })).limit).toBe('concurrency');
  });
});
