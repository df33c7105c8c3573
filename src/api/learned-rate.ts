/**
 * The key's request rate, learnt from its 429s (issue #32). The interface does not show the rate, so the pace is
 * open until the service first answers `429 ERR_RATE_LIMIT`; it is then set just under the rate the service let
 * through. While it binds, after a deep drop, it is raised fast back to the highest rate cut at lately, so that a
 * storm of 429s that passes costs seconds, not minutes. A fast raise that meets a 429 tells that the rate may have gone down for good:
 * the next fast raise waits twice as long, and slow raises go on meanwhile, as TCP backs off its retransmissions.
 * Past the level it comes back to, the pace rises slowly, so that a rate that went up is found again; past a level
 * that was only what this worker had to send when the service refused (its pace held nothing back), it goes on
 * doubling, since the key's rate may be far above.
 *
 * Each process learns its own share. Every worker of a key meets the key's 429s, so their shares together settle
 * just under the key's rate without talking to each other, as TCP's flows share a link.
 *
 * Deterministic for the same calls at the same times (tests drive it with a fake clock).
 */

/** The bounds and steps of the learnt rate: each is said here once. */
export const LEARNED_RATE = {
  /** How far back from a 429 the requests the service let through are counted, in ms. */
  measureMs: 5_000,
  /** After a 429, the pace is this share of the rate the service let through... */
  under: 0.95,
  /** ...and at least this share of the pace before it (two 429s are needed to halve it). */
  deepestCut: 0.5,
  /** The 429s of one burst are one signal: at most one cut in this many ms. */
  cutSpacingMs: 1_000,
  /** No slow raise for this long after a cut, in ms. */
  quietMs: 5_000,
  /** No fast raise for this long after a cut at first, in ms; doubled after each fast raise cut short. */
  fastQuietMs: 2_000,
  /**
   * Fast raises come back only from a deep drop: the last cut's rate under this share of the highest lately (a storm
   * of 429s, a rate halved). Nearer, the rate measured at cuts varies with the service's bursts, and the slow raises
   * serve.
   */
  deepDrop: 0.7,
  /** The longest wait before a fast raise, in ms. */
  fastQuietMaxMs: 8_000,
  /** Raises happen at most once in this many ms, and only while the pace held a request back in it. */
  raiseEveryMs: 1_000,
  /**
   * Each fast raise, up to {@link resumeShare} of the highest rate cut at in {@link recallMs}: this share of the pace
   * (doubling, as TCP's slow start up to its threshold).
   */
  fastRaise: 1,
  /** Each slow raise up to {@link resumeShare} of the rate cut at last: this share of the pace. */
  steadyRaise: 0.02,
  /** Where the fast raises stop: this share of the highest rate the service let through at a cut lately. */
  resumeShare: 0.97,
  /** How long the rate at a cut is remembered as a level to come back to, in ms. */
  recallMs: 30_000,
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
  /**
   * The rates the service let through at the cuts of the last {@link LEARNED_RATE.recallMs}, oldest first. `bound`:
   * the pace held requests back just before (the key sent all the service would take); otherwise the level is only
   * what this worker had to send, and the key's rate may be far above it.
   */
  private readonly levels: { atMs: number; perSec: number; bound: boolean }[] = [];
  /** Whether a fast raise was made since the last cut. */
  private fastSinceCut = false;
  /** The wait after a cut before a fast raise, in ms. */
  private fastQuietMs: number = LEARNED_RATE.fastQuietMs;
  private lastCutAt = Number.NEGATIVE_INFINITY;
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
    return this.pace !== undefined && this.pace >= this.topLevel().perSec * LEARNED_RATE.resumeShare;
  }

  /** The highest rate the service let through at a cut lately, in requests/s (0 before the first 429). */
  get level(): number {
    return this.topLevel().perSec;
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

  /** The service answered a request with `429 ERR_RATE_LIMIT` at `nowMs`: the pace is cut. */
  limited(nowMs: number): void {
    if (nowMs - this.lastCutAt < LEARNED_RATE.cutSpacingMs) return;
    this.forget(nowMs);
    this.forgetLevels(nowMs);
    // Measured over several seconds (or the process's age), holds included: a service's bucket refills while a 429
    // holds the key, and the burst that passes after the hold is not the rate.
    const from = Math.max(nowMs - LEARNED_RATE.measureMs, this.firstPassedAt ?? nowMs);
    const spanMs = Math.max(LEARNED_RATE.cutSpacingMs, nowMs - from);
    const measured = (this.passed.length * 1000) / spanMs;
    const cut = measured * LEARNED_RATE.under;
    const pace = this.pace;
    if (this.fastSinceCut && !this.probing) {
      this.fastQuietMs = Math.min(LEARNED_RATE.fastQuietMaxMs, this.fastQuietMs * 2);
    }
    const next =
      pace === undefined ? cut : Math.min(pace * LEARNED_RATE.under, Math.max(cut, pace * LEARNED_RATE.deepestCut));
    this.pace = Math.max(LEARNED_RATE.minPerSec, next);
    const bound = pace !== undefined && nowMs - this.lastHeldAt <= LEARNED_RATE.raiseEveryMs;
    this.levels.push({ atMs: nowMs, perSec: measured, bound });
    this.fastSinceCut = false;
    this.lastCutAt = nowMs;
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
    if (pace === undefined || nowMs - this.lastRaiseAt < LEARNED_RATE.raiseEveryMs) return;
    if (nowMs - this.lastHeldAt > LEARNED_RATE.raiseEveryMs) return;
    const quiet = nowMs - this.lastCutAt;
    this.forgetLevels(nowMs);
    const last = this.levels.at(-1)?.perSec ?? 0;
    const top = this.topLevel();
    const resume = top.perSec * LEARNED_RATE.resumeShare;
    let raised: number;
    const deep = last < top.perSec * LEARNED_RATE.deepDrop;
    if (((pace < resume && deep) || !top.bound) && quiet >= this.fastQuietMs) {
      // Doubling: back to the level, or on past a level that was only what this worker sent.
      raised =
        pace < resume ? Math.min(resume, pace * (1 + LEARNED_RATE.fastRaise)) : pace * (1 + LEARNED_RATE.fastRaise);
      if (pace >= resume) this.fastQuietMs = LEARNED_RATE.fastQuietMs;
      this.fastSinceCut = true;
    } else if (quiet < LEARNED_RATE.quietMs) {
      return;
    } else if (pace < last * LEARNED_RATE.resumeShare) {
      raised = Math.min(last * LEARNED_RATE.resumeShare, pace * (1 + LEARNED_RATE.steadyRaise));
    } else {
      // A second at the level without a 429: the next drop may be a storm again.
      if (pace >= resume) this.fastQuietMs = LEARNED_RATE.fastQuietMs;
      raised = pace * (1 + LEARNED_RATE.slowRaise);
    }
    this.pace = Math.max(raised, pace + LEARNED_RATE.minRaisePerSec);
    this.lastRaiseAt = nowMs;
  }

  /** The highest rate the service let through at a cut of the last {@link LEARNED_RATE.recallMs}. */
  private topLevel(): { perSec: number; bound: boolean } {
    const none: { perSec: number; bound: boolean } = { perSec: 0, bound: true };
    return this.levels.reduce((top, level) => (level.perSec > top.perSec ? level : top), none);
  }

  private forgetLevels(nowMs: number): void {
    // The newest level stays, however old: the pace always has a rate to come back to.
    while (this.levels.length > 1 && nowMs - this.levels[0]!.atMs > LEARNED_RATE.recallMs) this.levels.shift();
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
