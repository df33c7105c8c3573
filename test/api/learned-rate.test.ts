import { describe, expect, it } from 'vitest';
import { LEARNED_RATE, LearnedRate } from '../../src/api/learned-rate';
import { runAgainst } from './helpers/rate-service';

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

  it('after a 429 paces just under the rate the service let through in the last seconds', () => {
    const rate = new LearnedRate();
    const t = sendPassing(rate, 0, 2 * LEARNED_RATE.measureMs, 20);
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

  it('a young process measures over its own age, not seconds it did not live', () => {
    const rate = new LearnedRate();
    const t = sendPassing(rate, 0, 1000, 40);
    rate.limited(t);
    expect(rate.perSecond).toBeCloseTo(40 * LEARNED_RATE.under, 0);
  });

  it('the 429s of one burst cut once', () => {
    const rate = new LearnedRate();
    const t = sendPassing(rate, 0, 2 * LEARNED_RATE.measureMs, 20);
    rate.limited(t);
    const pace = rate.perSecond;
    rate.limited(t + 10);
    rate.limited(t + LEARNED_RATE.cutSpacingMs - 1);
    expect(rate.perSecond).toBe(pace);
  });

  // A service's bucket refills while a 429 holds the key, so the requests just after the hold pass in a burst: the
  // measure counts the hold's time too, over several seconds, not to read that burst as the rate.
  it('a rate halved for good (a bucket of a second): settled within 10% of it 10 s later, 429s rare after that', () => {
    const run = runAgainst(new LearnedRate(), (t) => (t < 20_000 ? 20 : 10), 120_000);
    const seconds = run.paceAt.slice(30, 120);
    const near = seconds.filter((pace) => pace > 9 && pace < 11);
    // The fast raise back to the old rate is tried again after 2, 4, 8 and 16 s (a second each, cut at once) until
    // the old rate is forgotten; from then on only the slow probe meets a 429, every 10 s at most.
    expect(near.length).toBeGreaterThanOrEqual(seconds.length - 4);
    const late = run.limitedAt.filter((t) => t >= 60_000);
    expect(late.length).toBeLessThanOrEqual(6);
  });

  it('a storm of 429s that passes costs seconds: the pace is back near the rate 5 s after it', () => {
    const storm = (t: number) => ((t >= 20_000 && t < 23_000) || (t >= 30_000 && t < 33_500) ? 2 : 20);
    const run = runAgainst(new LearnedRate(), storm, 60_000);
    expect(Math.min(...run.paceAt.slice(20, 24))).toBeLessThan(10); // cut in the storm
    for (const s of [28, 39, 50]) expect(run.paceAt[s]).toBeGreaterThan(0.9 * 20 * LEARNED_RATE.under);
  });

  it('storms that come while the worker sends little: its first rate is what it sent, not the limit', () => {
    // A storm every 3 to 9 s, 1.5 to 4 s long, at 2/s; 1,000/s between. The worker has 12 requests a second to send.
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const storms: [number, number][] = [];
    for (let t = 10_000; t < 300_000;) {
      t += 3000 + random() * 6000;
      const length = 1500 + random() * 2500;
      storms.push([t, t + length]);
      t += length;
    }
    const stormy = (t: number) => (storms.some(([from, to]) => t >= from && t < to) ? 2 : 1000);
    const run = runAgainst(new LearnedRate(), stormy, 300_000, 1000, 12);
    const passed = run.passedIn.reduce((sum, n) => sum + (n ?? 0), 0);
    const stormMs = storms.reduce((sum, [from, to]) => sum + Math.min(to, 300_000) - from, 0);
    const most = (12 * (300_000 - stormMs) + 2 * stormMs) / 1000; // all it had to send outside storms, 2/s in them
    expect(passed / most).toBeGreaterThan(0.8);
  });

  it('a steady rate: 429s under 0.5% of requests, and 97% of the rate used', () => {
    const run = runAgainst(new LearnedRate(), () => 20, 300_000);
    const passed = run.passedIn.reduce((sum, n) => sum + (n ?? 0), 0);
    expect(run.limitedAt.length / (passed + run.limitedAt.length)).toBeLessThan(0.005);
    expect(passed / 300).toBeGreaterThan(0.97 * 20);
  });

  it('never cuts below half the pace at once, nor below the floor', () => {
    const rate = new LearnedRate();
    let t = sendPassing(rate, 0, 2 * LEARNED_RATE.measureMs, 20);
    rate.limited(t);
    const first = rate.perSecond!;
    t += LEARNED_RATE.measureMs + 1000; // nothing passed in the measure's span
    rate.limited(t);
    expect(rate.perSecond).toBeCloseTo(first * LEARNED_RATE.deepestCut, 5);
    for (let i = 0; i < 40; i += 1) rate.limited((t += 2000));
    expect(rate.perSecond).toBe(LEARNED_RATE.minPerSec);
  });

  it('is raised only while it binds, after a quiet spell, fast up to near the rate it was cut at, then slowly', () => {
    const idle = new LearnedRate();
    let t = sendPassing(idle, 0, 2 * LEARNED_RATE.measureMs, 20);
    idle.limited(t);
    const cutTo = idle.perSecond!;
    for (let i = 0; i < 60; i += 1) idle.take((t += 2000)); // one request per 2 s: the pace does not bind
    expect(idle.perSecond).toBe(cutTo);

    // A first cut is what this worker sent when the service first refused: the rate may be far above it, so once
    // back at it the pace goes on doubling. A cut while the pace held requests back is the rate: slow past it.
    const busy = new LearnedRate();
    t = sendPassing(busy, 0, 2 * LEARNED_RATE.measureMs, 20);
    busy.limited(t);
    const first = busy.level;
    const paces: number[] = [];
    const start = t;
    const everySecond = (until: number, onSecond: () => void) => {
      for (; t < until; t += 5) {
        if (busy.take(t) === 0) busy.passedAt(t);
        else busy.refund(); // held back: asked again 5 ms later
        if ((t - start) % 1000 === 0) onSecond();
      }
    };
    everySecond(start + 8000, () => paces.push(busy.perSecond!)); // far more than the pace: it always binds
    expect(paces[LEARNED_RATE.fastQuietMs / 1000 - 1]).toBe(paces[0]); // no raise before the quiet spell
    expect(paces[LEARNED_RATE.fastQuietMs / 1000]).toBeCloseTo(first * LEARNED_RATE.resumeShare, 5);
    expect(paces[7]).toBeGreaterThan(2 * first); // on past the first level

    // Against a service that lets 20/s through, later cuts come while the pace binds: it settles near the rate, and
    // rises past it only slowly.
    const run = runAgainst(new LearnedRate(), () => 20, 120_000);
    const settled = run.paceAt.slice(10);
    expect(Math.max(...settled)).toBeLessThan(20 * 1.1);
    expect(Math.min(...settled)).toBeGreaterThan(20 * 0.9 * LEARNED_RATE.under);
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
