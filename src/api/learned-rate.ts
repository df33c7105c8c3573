/**
 * The key's request rate, learnt from its 429s (issue #32). The interface does not show the rate, so the pace is
 * open until the service first answers `429 ERR_RATE_LIMIT`; it is then set just under the rate the service let
 * through, and raised slowly while it binds, so that a rate that went up is found again.
 *
 * Each process learns its own share. Every worker of a key meets the key's 429s, so their shares together settle
 * just under the key's rate without talking to each other, as TCP's flows share a link.
 *
 * Deterministic for the same calls at the same times (tests drive it with a fake clock).
 */

/** The bounds and steps of the learnt rate: each is said here once. */
export const LEARNED_RATE = {
  /** How far back from a 429 the requests the service let through are counted, in ms. */
  measureMs: 2_000,
  /** After a 429, the pace is this share of the rate the service let through... */
  under: 0.95,
  /** ...and at least this share of the pace before it (two 429s are needed to halve it). */
  deepestCut: 0.5,
  /** The 429s of one burst are one signal: at most one cut in this many ms. */
  cutSpacingMs: 1_000,
  /** No raise for this long after a cut, in ms. */
  quietMs: 5_000,
  /** Raises happen at most once in this many ms, and only while the pace held a request back in it. */
  raiseEveryMs: 1_000,
  /** Each raise, up to {@link resumeShare} of the rate measured at the last cut: this share of the pace. */
  fastRaise: 0.02,
  /** Where the fast raises stop: this share of the rate the service let through at the last cut. */
  resumeShare: 0.97,
  /** Each raise beyond it (probing for a rate that went up): this share of the pace, about 6% a minute. */
  slowRaise: 0.001,
  /** The slowest pace, in requests/s: a key is never paced to a stop. */
  minPerSec: 0.2,
  /**
   * The smallest raise, in requests/s: a small share (a worker that met a 429 while it sent little, the key being
   * shared) grows back by at least this much a second, as TCP's additive increase does not depend on the window.
   */
  minRaisePerSec: 0.02,
  /** The bucket holds this many seconds of the pace (at least one request). */
  burstSeconds: 0.5,
} as const;

/** A token bucket whose rate this process learns (see the file's comment). */
export class LearnedRate {
  /** Requests/s; undefined while no 429 has been seen (open). */
  private pace: number | undefined;
  /** The rate the service let through at the last cut. */
  private cutLevel = 0;
  private lastCutAt = Number.NEGATIVE_INFINITY;
  /** The end of the last 429's hold of the key. */
  private heldUntil = Number.NEGATIVE_INFINITY;
  private lastRaiseAt = Number.NEGATIVE_INFINITY;
  private lastHeldAt = Number.NEGATIVE_INFINITY;
  private tokens = 0;
  private updatedAt = 0;
  /** Send times of requests the service answered without a rate 429, oldest first, within `measureMs`. */
  private readonly passed: number[] = [];
  /** When the first of them was sent: a process younger than `measureMs` measures over its own age. */
  private firstPassedAt: number | undefined;

  /** Whether the pace is past the fast raises (above the rate the service let through at its last cut, nearly). */
  get probing(): boolean {
    return this.pace !== undefined && this.pace >= this.cutLevel * LEARNED_RATE.resumeShare;
  }

  /** The learnt pace in requests/s, or undefined while open. */
  get perSecond(): number | undefined {
    return this.pace;
  }

  /** Takes a token for a request at `nowMs`; returns the ms until it is due (0: go now). */
  take(nowMs: number): number {
    if (this.pace === undefined) return 0;
    this.refill(nowMs);
    this.tokens -= 1;
    if (this.tokens >= 0) return 0;
    this.lastHeldAt = nowMs;
    return Math.ceil((-this.tokens * 1000) / this.pace);
  }

  /** Gives back a token taken by {@link take} that will not be used. */
  refund(): void {
    if (this.pace !== undefined) this.tokens = Math.min(this.burst(this.pace), this.tokens + 1);
  }

  /** A request sent at `sentAtMs` was answered without a rate 429. */
  passedAt(sentAtMs: number): void {
    this.passed.push(sentAtMs);
    this.firstPassedAt ??= sentAtMs;
    this.forget(sentAtMs);
  }

  /**
   * The service answered a request with `429 ERR_RATE_LIMIT` at `nowMs`, holding the key for `holdMs` (its
   * Retry-After): the pace is cut.
   */
  limited(nowMs: number, holdMs = 0): void {
    if (nowMs - this.lastCutAt < LEARNED_RATE.cutSpacingMs) return;
    this.forget(nowMs);
    // Measured over the time the key could send: its own age, less the last 429's hold (nothing passes in a hold,
    // and a 429 just after one would otherwise read half the rate).
    const from = Math.max(nowMs - LEARNED_RATE.measureMs, this.firstPassedAt ?? nowMs);
    const held = Math.max(0, Math.min(nowMs, this.heldUntil) - Math.max(from, this.lastCutAt));
    const spanMs = Math.max(LEARNED_RATE.cutSpacingMs, nowMs - from - held);
    const measured = (this.passed.length * 1000) / spanMs;
    const cut = measured * LEARNED_RATE.under;
    const next =
      this.pace === undefined
        ? cut
        : Math.min(this.pace * LEARNED_RATE.under, Math.max(cut, this.pace * LEARNED_RATE.deepestCut));
    this.pace = Math.max(LEARNED_RATE.minPerSec, next);
    this.cutLevel = measured;
    this.lastCutAt = nowMs;
    this.heldUntil = nowMs + holdMs;
    this.tokens = 0;
    this.updatedAt = nowMs;
  }

  private refill(nowMs: number): void {
    this.raise(nowMs);
    const pace = this.pace ?? LEARNED_RATE.minPerSec;
    const elapsed = Math.max(0, nowMs - this.updatedAt);
    this.tokens = Math.min(this.burst(pace), this.tokens + (elapsed * pace) / 1000);
    this.updatedAt = nowMs;
  }

  /** Raises the pace while it binds and no 429 came lately (see {@link LEARNED_RATE}). */
  private raise(nowMs: number): void {
    const pace = this.pace;
    if (pace === undefined) return;
    if (nowMs - this.lastCutAt < LEARNED_RATE.quietMs || nowMs - this.lastRaiseAt < LEARNED_RATE.raiseEveryMs) return;
    if (nowMs - this.lastHeldAt > LEARNED_RATE.raiseEveryMs) return;
    const fast = pace < this.cutLevel * LEARNED_RATE.resumeShare;
    this.pace =
      pace + Math.max(LEARNED_RATE.minRaisePerSec, pace * (fast ? LEARNED_RATE.fastRaise : LEARNED_RATE.slowRaise));
    this.lastRaiseAt = nowMs;
  }

  private burst(pace: number): number {
    return Math.max(1, pace * LEARNED_RATE.burstSeconds);
  }

  private forget(nowMs: number): void {
    const since = nowMs - LEARNED_RATE.measureMs;
    let drop = 0;
    while (drop < this.passed.length && this.passed[drop]! <= since) drop += 1;
    if (drop > 0) this.passed.splice(0, drop);
  }
}
