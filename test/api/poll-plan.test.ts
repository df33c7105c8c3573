import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLL_PLAN_OPTIONS, PollPlan, type PollBounds, type ThrottleSignal } from '../../src/api/poll-plan';

const INTERVAL = 1_000;
const MAX_WAIT = 60_000;
const at = (elapsedMs: number): PollBounds => ({ intervalMs: INTERVAL, elapsedMs, maxWaitMs: MAX_WAIT });

/** A plan that has learnt `n` explorers of `model` ending after 1 to 3 s (uniform, in order). */
function learnt(n = 100, model = 'm'): PollPlan {
  const plan = new PollPlan();
  for (let i = 0; i < n; i++) {
    plan.begin(model);
    plan.observe(model, 1_000 + (2_000 * i) / (n - 1));
  }
  return plan;
}

/** The first non-explorer ticket of `model`. */
function planned(plan: PollPlan, model = 'm') {
  for (;;) {
    const ticket = plan.begin(model);
    if (!ticket.explore) return ticket;
  }
}

describe('the poll plan', () => {
  it('with nothing learnt, polls at the minimum interval (the behaviour before the plan), whatever binds', () => {
    const plan = new PollPlan();
    for (const signal of [undefined, 'rate_limited', 'quota_exceeded'] as const) {
      if (signal) plan.signal(signal, 0);
      const ticket = plan.begin('m');
      expect(ticket.explore).toBe(true);
      expect(plan.delay('m', ticket, at(0), 0)).toBe(INTERVAL);
      expect(plan.delay('m', ticket, at(4_000), 0)).toBe(INTERVAL);
    }
    // Nor without a ticket (a creation followed from the ledger, or accepted before the plan existed).
    expect(learnt().delay('m', undefined, at(0), 0)).toBe(INTERVAL);
  });

  it('explores every creation until minSamples are known, then one in exploreEvery', () => {
    const plan = new PollPlan();
    const first = Array.from({ length: DEFAULT_POLL_PLAN_OPTIONS.minSamples }, () => plan.begin('m').explore);
    expect(first.every(Boolean)).toBe(true);
    for (let i = 0; i < DEFAULT_POLL_PLAN_OPTIONS.minSamples; i++) plan.observe('m', 2_000);
    const later = Array.from({ length: 160 }, () => plan.begin('m').explore).filter(Boolean);
    expect(later).toHaveLength(160 / DEFAULT_POLL_PLAN_OPTIONS.exploreEvery);
    // Per model: another model starts learning from nothing.
    expect(plan.begin('other').explore).toBe(true);
  });

  it('when the rate binds, polls late: at the rate quantile, then at the quantile of what is left', () => {
    const plan = learnt();
    plan.signal('rate_limited', 0);
    const ticket = planned(plan);
    expect(plan.regime(0)).toBe('rate');
    // 95th percentile of 1-3 s: 2.9 s.
    expect(plan.delay('m', ticket, at(0), 0)).toBeCloseTo(2_900, -2);
    // Still running at 2.9 s: the rest of the tail, no sooner than the interval.
    expect(plan.delay('m', ticket, at(2_900), 0)).toBe(INTERVAL);
    // Past every time seen: the minimum interval.
    expect(plan.delay('m', ticket, at(10_000), 0)).toBe(INTERVAL);
    // The task queue holding activities back, second after second, is the rate binding too.
    const queued = learnt();
    lagEverySecond(queued, 0, DEFAULT_POLL_PLAN_OPTIONS.lastingSeconds);
    expect(queued.regime(5_000)).toBe('rate');
  });

  it('when the quota binds or nothing does, polls early: the first at a low quantile, then at the interval', () => {
    for (const signal of [undefined, 'quota_exceeded'] as const) {
      const plan = learnt();
      if (signal) plan.signal(signal, 0);
      const ticket = planned(plan);
      expect(plan.regime(0)).toBe(signal ? 'concurrency' : 'open');
      expect(plan.delay('m', ticket, at(0), 0)).toBeCloseTo(1_200, -2);
      expect(plan.delay('m', ticket, at(1_200), 0)).toBe(INTERVAL);
    }
  });

  it('an explorer, once learnt, starts at half the 5th percentile, then polls at the interval', () => {
    const plan = new PollPlan();
    for (let i = 0; i < 100; i++) plan.observe('m', 4_000 + 40 * i); // 4 to 8 s
    let ticket = plan.begin('m');
    while (!ticket.explore) ticket = plan.begin('m');
    plan.signal('rate_limited', 0);
    // The 5th percentile is 4.16 s: the first poll at 2.08 s, then every interval (the bracket stays one interval).
    expect(plan.delay('m', ticket, at(0), 0)).toBe(2_080);
    expect(plan.delay('m', ticket, at(2_080), 0)).toBe(INTERVAL);
    // Never sooner than the interval, when the times are short.
    const quick = new PollPlan();
    for (let i = 0; i < 100; i++) quick.observe('m', 1_000);
    expect(quick.delay('m', { explore: true }, at(0), 0)).toBe(INTERVAL);
  });

  it('a quota 429 outranks the rate, and a signal is forgotten after regimeMemoryMs', () => {
    const plan = learnt();
    plan.signal('rate_limited', 0);
    plan.signal('quota_exceeded', 1_000);
    expect(plan.regime(1_000)).toBe('concurrency');
    expect(plan.regime(1_000 + DEFAULT_POLL_PLAN_OPTIONS.regimeMemoryMs + 1)).toBe('open');
    expect(plan.regime(DEFAULT_POLL_PLAN_OPTIONS.regimeMemoryMs)).toBe('concurrency');
  });

  it('tells what holds keys back: the quota, then a 429 of the rate, then the task queue, which polls time as the rate', () => {
    const plan = new PollPlan();
    expect(plan.heldBy(0)).toBe('open');
    const t = lagEverySecond(plan, 0, DEFAULT_POLL_PLAN_OPTIONS.lastingSeconds);
    expect([plan.heldBy(t), plan.regime(t)]).toEqual(['queue', 'rate']);
    plan.signal('rate_limited', t + 10);
    expect([plan.heldBy(t + 10), plan.regime(t + 10)]).toEqual(['rate', 'rate']);
    plan.signal('quota_exceeded', t + 20);
    expect([plan.heldBy(t + 20), plan.regime(t + 20)]).toEqual(['concurrency', 'concurrency']);
    expect(plan.heldBy(t + 21 + DEFAULT_POLL_PLAN_OPTIONS.regimeMemoryMs)).toBe('open');
  });

  it("tells the service's own 429s of the last few seconds (refusedNow) from the worker's pace and gate", () => {
    const plan = new PollPlan();
    const { lastingMs } = DEFAULT_POLL_PLAN_OPTIONS;
    lagEverySecond(plan, 0, DEFAULT_POLL_PLAN_OPTIONS.lastingSeconds);
    plan.signal('paced', 1_000);
    plan.signal('gated', 2_000);
    expect(plan.refusedNow(2_000)).toBe(false);
    plan.signal('quota_exceeded', 3_000);
    expect([plan.refusedNow(3_000 + lastingMs), plan.heldNow(3_000 + lastingMs)]).toEqual([true, 'concurrency']);
    expect(plan.refusedNow(3_001 + lastingMs)).toBe(false);
    expect(plan.heldBy(3_001 + lastingMs)).toBe('concurrency'); // polls keep the 429's regime for 30 s
  });

  it('tells a burst of the task queue from a limit that binds: a lag within a few seconds is not the rate', () => {
    const plan = new PollPlan();
    // Matching releases, at once, every retry that fell due while the history service restarted: hundreds of
    // late starts within two seconds.
    for (let ms = 0; ms < 2_000; ms += 5) plan.signal('queue_lag', 60_000 + ms);
    expect([plan.heldBy(62_000), plan.regime(62_000)]).toEqual(['open', 'open']);
    // A lag that lasts, one second after another, is a limit that binds.
    const t = lagEverySecond(plan, 70_000, DEFAULT_POLL_PLAN_OPTIONS.lastingSeconds);
    expect(plan.heldBy(t)).toBe('queue');
    // So is this worker's own pace: a moment of it is a burst, a pace that holds second after second binds.
    const paced = new PollPlan();
    for (let ms = 0; ms < 1_000; ms += 10) paced.signal('paced', ms);
    expect(paced.regime(1_000)).toBe('open');
    for (let i = 1; i < DEFAULT_POLL_PLAN_OPTIONS.lastingSeconds; i += 1) paced.signal('paced', i * 1000);
    expect([paced.heldBy(5_000), paced.regime(5_000)]).toEqual(['rate', 'rate']);
    // Lags spread thinner than the memory do not add up.
    const thin = new PollPlan();
    for (let i = 0; i < 10; i += 1) thin.signal('queue_lag', i * DEFAULT_POLL_PLAN_OPTIONS.regimeMemoryMs);
    expect(thin.heldBy(9 * DEFAULT_POLL_PLAN_OPTIONS.regimeMemoryMs)).toBe('open');
  });

  it('follows a service that slows down: the window keeps the newest times', () => {
    const plan = learnt();
    plan.signal('rate_limited', 0);
    for (let i = 0; i < DEFAULT_POLL_PLAN_OPTIONS.window; i++) plan.observe('m', 10_000);
    expect(plan.delay('m', planned(plan), at(0), 0)).toBe(10_000);
  });

  it('never under the minimum interval, never past the maximum wait, and the same history gives the same delays', () => {
    const signals: (ThrottleSignal | undefined)[] = [undefined, 'rate_limited', 'quota_exceeded', 'queue_lag'];
    const history = fc.record({
      times: fc.array(fc.integer({ min: 0, max: 600_000 }), { minLength: 0, maxLength: 300, size: 'max' }),
      signal: fc.constantFrom(...signals),
      begun: fc.integer({ min: 0, max: 40 }),
      polls: fc.array(
        fc.record({
          elapsedMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 700_000 })),
          intervalMs: fc.integer({ min: 1, max: 120_000 }),
          maxWaitMs: fc.integer({ min: 1, max: 600_000 }),
        }),
        { minLength: 1, maxLength: 20 },
      ),
    });
    let departed = 0;
    fc.assert(
      fc.property(history, ({ times, signal, begun, polls }) => {
        const run = () => {
          const plan = new PollPlan({ minSamples: 3, exploreEvery: 4 });
          for (const t of times) plan.observe('m', t);
          if (signal) plan.signal(signal, 0);
          let ticket = plan.begin('m');
          for (let i = 0; i < begun; i++) ticket = plan.begin('m');
          return polls.map((bounds) => {
            const d = plan.delay('m', ticket, bounds, 0);
            expect(d).toBeGreaterThanOrEqual(bounds.intervalMs);
            // Past the maximum wait only by the interval itself (a poll after the wait ends the key).
            expect(bounds.elapsedMs + d).toBeLessThanOrEqual(
              Math.max(bounds.maxWaitMs, bounds.elapsedMs + bounds.intervalMs) + 1,
            );
            if (d !== bounds.intervalMs) departed += 1;
            return d;
          });
        };
        expect(run()).toEqual(run());
      }),
      { numRuns: 500 },
    );
    // The plan left the interval often enough for the bounds to have been tried.
    expect(departed).toBeGreaterThan(500);
  });
});

/** The task queue's lag once in each of `seconds` seconds from `from`; returns the time of the last. */
function lagEverySecond(plan: PollPlan, from: number, seconds: number): number {
  let t = from;
  for (let i = 0; i < seconds; i += 1) plan.signal('queue_lag', (t = from + i * 1000));
  return t;
}
