import type { LearnedRate } from '../../../src/api/learned-rate';

/** A key's rate over time, in requests/s: the service's side of a simulated run. */
export type RateAt = (tMs: number) => number;

/** What a simulated run of a {@link LearnedRate} saw. */
export interface RateRun {
  /** When each 429 was answered, in ms. */
  readonly limitedAt: number[];
  /** The learnt pace at the end of each second (index: the second). */
  readonly paceAt: number[];
  /** Requests the service let through in each second. */
  readonly passedIn: number[];
}

/**
 * Drives `rate` for `ms` with a client that has `demandPerSec` requests a second to send (at most one every 5 ms, when
 * the pace allows) against a service whose token bucket (a second of burst) follows `rateAt`. A 429 holds the key
 * for `holdMs`.
 */
export function runAgainst(rate: LearnedRate, rateAt: RateAt, ms: number, holdMs = 1000, demandPerSec = 200): RateRun {
  const run: RateRun = { limitedAt: [], paceAt: [], passedIn: [] };
  let bucket = rateAt(0);
  let heldUntil = 0;
  let dueAt = 0;
  let wanted = 0; // requests the client has to send, at demandPerSec
  for (let t = 0; t < ms; t += 5) {
    wanted = Math.min(wanted + (demandPerSec * 5) / 1000, demandPerSec);
    const perSec = rateAt(t);
    bucket = Math.min(perSec, bucket + (perSec * 5) / 1000);
    const second = Math.floor(t / 1000);
    if (t % 1000 === 995) run.paceAt[second] = rate.perSecond ?? Number.POSITIVE_INFINITY;
    if (t < heldUntil || t < dueAt || wanted < 1) continue;
    const wait = rate.take(t);
    if (wait > 0) {
      rate.refund();
      dueAt = t + wait;
      continue;
    }
    wanted -= 1;
    if (bucket >= 1) {
      bucket -= 1;
      rate.passedAt(t);
      run.passedIn[second] = (run.passedIn[second] ?? 0) + 1;
    } else {
      rate.limited(t);
      run.limitedAt.push(t);
      heldUntil = t + holdMs;
    }
  }
  return run;
}
