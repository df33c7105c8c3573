/**
 * The account's quota of creations in flight, learnt from its 429s (issue #32). The interface does not show the
 * quota, so the gate is open until the service first answers `429 ERR_QUOTA_EXCEEDED`; from then on this process
 * sends a submission only while fewer of its creations are in flight than it had then. A poll that finds a
 * creation ended frees its place at once, for a submission waiting in this process, without waiting for a 429 to
 * say so. While the gate is full the limit is probed upward (one more place, then two, four...), so that a quota
 * that went up is found again; a 429 sets it back.
 *
 * Each process learns its own share of the account's quota, as {@link LearnedRate} does of the key's rate.
 */

/** The bounds and steps of the learnt quota: each is said here once. */
export const QUOTA_GATE = {
  /** While the gate is full, one probe (a larger limit) in this many ms. */
  probeEveryMs: 5_000,
  /** The largest probe step; steps double from 1 while no 429 comes. */
  maxStep: 8,
  /** A creation not seen in flight for this long is forgotten (its row was cancelled, or another process has it). */
  forgetAfterMs: 10 * 60_000,
  /** Most creations remembered; the oldest are forgotten first. */
  maxEntries: 100_000,
} as const;

/** A place taken for one submission: given back with {@link QuotaGate.answered}. */
export interface QuotaTicket {
  readonly gate: QuotaGate;
  /** Sent above the learnt limit (a probe, or the pass after a Retry-After). */
  readonly probe: boolean;
}

export class QuotaGate {
  /** Creations of this process in flight: id → when last seen in flight. */
  private readonly inFlight = new Map<string, number>();
  /** Submissions sent and not yet answered. */
  private sending = 0;
  /** The learnt limit; undefined while open. */
  private limit: number | undefined;
  private step = 1;
  private lastChangeAt = 0;
  /** After a 429, when its Retry-After has passed: the one pass it allows (see {@link enter}). */
  private passAt: number | undefined;
  private readonly waiters = new Set<() => void>();

  /** The learnt limit of creations in flight, or undefined while open. */
  get learnt(): number | undefined {
    return this.limit;
  }

  /** Creations in flight and submissions unanswered, as this process knows them. */
  get taken(): number {
    return this.inFlight.size + this.sending;
  }

  /** A place for a submission at `nowMs`, or undefined when the gate is full. */
  enter(nowMs: number): QuotaTicket | undefined {
    this.forget(nowMs);
    const limit = this.limit;
    const probe = limit !== undefined && this.taken >= limit;
    if (probe) {
      if (this.passAt !== undefined && nowMs >= this.passAt) {
        // No end seen here since the 429, and its Retry-After has passed: the places may have freed where this
        // process does not look (another worker polled them). One submission goes, as the service allows.
        this.passAt = undefined;
      } else if (nowMs - this.lastChangeAt >= QUOTA_GATE.probeEveryMs) {
        this.limit = limit + this.step;
        this.step = Math.min(QUOTA_GATE.maxStep, this.step * 2);
        this.lastChangeAt = nowMs;
      } else {
        return undefined;
      }
    }
    this.sending += 1;
    return { gate: this, probe };
  }

  /**
   * The submission of `ticket` was answered: accepted as `creationId`, or not (any other answer). A 429
   * ERR_QUOTA_EXCEEDED is told with {@link exceeded} as well.
   */
  answered(ticket: QuotaTicket, nowMs: number, creationId?: string): void {
    if (ticket.gate !== this) return;
    this.sending = Math.max(0, this.sending - 1);
    if (creationId !== undefined) this.seen(creationId, nowMs);
    else this.wake();
  }

  /**
   * The service said the quota is full at `nowMs`, to be tried again after `retryAfterMs`: the limit is what this
   * process has in flight.
   */
  exceeded(nowMs: number, retryAfterMs: number): void {
    this.limit = Math.max(1, this.inFlight.size);
    this.step = 1;
    this.lastChangeAt = nowMs;
    this.passAt = nowMs + retryAfterMs;
  }

  /** A poll found the creation still in flight. */
  seen(creationId: string, nowMs: number): void {
    this.inFlight.delete(creationId);
    this.inFlight.set(creationId, nowMs);
    if (this.inFlight.size > QUOTA_GATE.maxEntries) this.drop(this.inFlight.keys().next().value);
  }

  /** A poll found the creation ended (or gone): its place is free. */
  ended(creationId: string): void {
    if (this.inFlight.delete(creationId)) this.freed();
  }

  /** Resolves true when a place may have freed within `ms`, false when the time ran out or `signal` aborted. */
  waitForPlace(ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (freed: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        signal?.removeEventListener('abort', abort);
        resolve(freed);
      };
      const wake = () => done(true);
      const abort = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      this.waiters.add(wake);
      signal?.addEventListener('abort', abort, { once: true });
    });
  }

  /** Wakes one waiter: one place freed. */
  private wake(): void {
    const first = this.waiters.values().next();
    if (!first.done) first.value();
  }

  private drop(id: string | undefined): void {
    if (id !== undefined && this.inFlight.delete(id)) this.freed();
  }

  /** A creation's place freed where this process sees it: no blind pass is needed. */
  private freed(): void {
    this.passAt = undefined;
    this.wake();
  }

  private forget(nowMs: number): void {
    for (const [id, at] of this.inFlight) {
      if (nowMs - at < QUOTA_GATE.forgetAfterMs) break;
      this.drop(id);
    }
  }
}
