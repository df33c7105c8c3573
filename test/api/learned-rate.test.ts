import { describe, expect, it } from 'vitest';
import { LEARNED_RATE, LearnedRate } from '../../src/api/learned-rate';

/** Sends at `perSec` from `from` for `ms`, every request passing; returns the time after. */
function sendPassing(rate: LearnedRate, from: number, ms: number, perSec: number): number {
  const step = 1000 / perSec;
  let t = from;
  for (; t < from + ms; t += step) {
    rate.take(t);
    rate.passedAt(t);
  }
  return t;
}

describe('LearnedRate', () => {
  it('is open until the first 429: no request waits, whatever the rate', () => {
    const rate = new LearnedRate();
    for (let t = 0; t < 1000; t += 1) expect(rate.take(t)).toBe(0);
    expect(rate.perSecond).toBeUndefined();
  });

  it('after a 429 paces just under the rate the service let through in the last two seconds', () => {
    const rate = new LearnedRate();
    const t = sendPassing(rate, 0, 4000, 20);
    rate.limited(t);
    expect(rate.perSecond).toBeCloseTo(20 * LEARNED_RATE.under, 0);
    // A bucket of half a second of the pace goes at once; then each waits one more interval of the pace.
    const pace = rate.perSecond!;
    const burst = Math.floor(pace * LEARNED_RATE.burstSeconds);
    // The bucket is empty at the cut (the key waits out the 429's Retry-After) and full half a second later.
    const later = t + 1000 * LEARNED_RATE.burstSeconds;
    const waits = Array.from({ length: burst + 2 }, () => rate.take(later));
    expect(waits.slice(0, burst)).toEqual(Array(burst).fill(0));
    expect(waits[burst]).toBeGreaterThan(0);
    expect(waits[burst + 1]! - waits[burst]!).toBeCloseTo(1000 / pace, -1);
  });

  it('a young process measures over its own age, not two seconds it did not live', () => {
    const rate = new LearnedRate();
    const t = sendPassing(rate, 0, 1000, 40);
    rate.limited(t);
    expect(rate.perSecond).toBeCloseTo(40 * LEARNED_RATE.under, 0);
  });

  it('the 429s of one burst cut once; a rate halved is followed within two cuts', () => {
    const rate = new LearnedRate();
    let t = sendPassing(rate, 0, 4000, 20);
    rate.limited(t);
    rate.limited(t + 10);
    rate.limited(t + 500);
    expect(rate.perSecond).toBeCloseTo(19.5 * LEARNED_RATE.under, 1);
    // The service now lets 10/s through.
    t = sendPassing(rate, t + 1000, 2000, 10);
    rate.limited(t);
    // Under what the service now lets through, but at most halved at once.
    expect(rate.perSecond).toBeLessThan(10);
    expect(rate.perSecond).toBeGreaterThanOrEqual(19.5 * LEARNED_RATE.under * LEARNED_RATE.deepestCut);
  });

  it("a 429 just after a 429's hold measures only the time the key could send", () => {
    const rate = new LearnedRate();
    let t = sendPassing(rate, 0, 4000, 25);
    rate.limited(t, 1000); // 25/s let through: a pace of 23.75
    t = sendPassing(rate, t + 1000, 1000, 20); // held 1 s, then 20/s for a second: the service's rate now
    rate.limited(t, 1000);
    // 20 passed in the second the key could send: 20/s, not the 10/s of two seconds with the hold in them.
    expect(rate.perSecond).toBeCloseTo(20 * LEARNED_RATE.under, 0);
  });

  it('never cuts below half the pace at once, nor below the floor', () => {
    const rate = new LearnedRate();
    let t = sendPassing(rate, 0, 4000, 20);
    rate.limited(t);
    t += 3000; // nothing passed in the last two seconds
    rate.limited(t);
    expect(rate.perSecond).toBeCloseTo(19.5 * LEARNED_RATE.under * LEARNED_RATE.deepestCut, 1);
    for (let i = 0; i < 40; i += 1) rate.limited((t += 2000));
    expect(rate.perSecond).toBe(LEARNED_RATE.minPerSec);
  });

  it('is raised only while it binds, after a quiet spell, fast up to near the rate it was cut at, then slowly', () => {
    const idle = new LearnedRate();
    let t = sendPassing(idle, 0, 4000, 20);
    idle.limited(t);
    for (let i = 0; i < 60; i += 1) idle.take((t += 2000)); // one request per 2 s: the pace does not bind
    expect(idle.perSecond).toBeCloseTo(19.5 * LEARNED_RATE.under, 1);

    const busy = new LearnedRate();
    t = sendPassing(busy, 0, 4000, 20);
    busy.limited(t);
    const start = t;
    const paces: number[] = [];
    for (; t < start + 120_000; t += 5) {
      busy.take(t); // far more than the pace: it always binds
      if ((t - start) % 1000 === 0) paces.push(busy.perSecond!);
    }
    const second = (s: number) => paces[s]!;
    expect(second(LEARNED_RATE.quietMs / 1000 - 1)).toBeCloseTo(19.5 * LEARNED_RATE.under, 1);
    // The service let 19.5/s through at the cut (39 requests in its last two seconds).
    expect(second(12)).toBeGreaterThanOrEqual(19.5 * LEARNED_RATE.resumeShare);
    expect(second(12)).toBeLessThan(19.5); // not yet above what the service let through
    // Beyond it, about 0.1% a second.
    expect(second(110) / second(50)).toBeGreaterThan(1.04);
    expect(second(110) / second(50)).toBeLessThan(1.08);
  });

  it('a small share grows back by a fixed step at least, not by a share of itself', () => {
    const rate = new LearnedRate();
    rate.passedAt(0);
    rate.limited(1000); // one request in its first second: a pace of 0.9/s
    const start = rate.perSecond!;
    let t = 1000;
    for (; t < 1000 + LEARNED_RATE.quietMs + 100_000; t += 5) rate.take(t);
    expect(rate.perSecond! - start).toBeGreaterThan(LEARNED_RATE.minRaisePerSec * 90);
  });

  it('the same calls at the same times give the same pace (deterministic)', () => {
    const run = () => {
      const rate = new LearnedRate();
      let t = sendPassing(rate, 0, 3000, 25);
      rate.limited(t);
      const waits: number[] = [];
      for (let i = 0; i < 500; i += 1) waits.push(rate.take((t += 7)));
      return { waits, pace: rate.perSecond };
    };
    expect(run()).toEqual(run());
  });
});
