import { LearnedRate } from './learned-rate';
import { QuotaGate } from './quota-gate';

/**
 * Process-wide waits. When the service tells a key to wait (a 429 on a submission or the catalog, a 503 with
 * Retry-After), every later request of that key in this process fails fast until then, without being sent. A
 * 429 on a poll holds only that creation, and a 429 ERR_QUOTA_EXCEEDED only the key's submissions (the quota counts
 * creations, not polls). The key's learnt rate and quota live here too. Entries are keyed by a key's fingerprint,
 * never by the key itself.
 */
export class HoldRegistry {
  private readonly keyHolds = new Map<string, number>();
  private readonly submitHolds = new Map<string, number>();
  private readonly rates = new Map<string, LearnedRate>();
  private readonly gates = new Map<string, QuotaGate>();
  private readonly creationHolds = new Map<string, number>();
  private readonly lastPoll = new Map<string, number>();
  private learnedPollIntervalMs = 0;

  constructor(
    /** Most creations remembered (oldest forgotten first); bounds memory over millions of rows. */
    private readonly maxEntries = 100_000,
  ) {}

  /** Milliseconds left on a hold of the key (0 when none). */
  keyHoldLeft(keyId: string, nowMs: number): number {
    return left(this.keyHolds, keyId, nowMs);
  }

  /** Milliseconds left on a hold of the key's submissions (0 when none). */
  submitHoldLeft(keyId: string, nowMs: number): number {
    return left(this.submitHolds, keyId, nowMs);
  }

  /** Milliseconds left on a hold of the creation (0 when none). */
  creationHoldLeft(creationId: string, nowMs: number): number {
    return left(this.creationHolds, creationId, nowMs);
  }

  holdKey(keyId: string, untilMs: number): void {
    this.keyHolds.set(keyId, Math.max(untilMs, this.keyHolds.get(keyId) ?? 0));
  }

  holdSubmissions(keyId: string, untilMs: number): void {
    this.submitHolds.set(keyId, Math.max(untilMs, this.submitHolds.get(keyId) ?? 0));
  }

  /** The key's request rate as this process learns it. */
  rateOf(keyId: string): LearnedRate {
    return getOrAdd(this.rates, keyId, () => new LearnedRate());
  }

  /** The account's quota of creations in flight, as this process learns it for the key. */
  quotaOf(keyId: string): QuotaGate {
    return getOrAdd(this.gates, keyId, () => new QuotaGate());
  }

  holdCreation(creationId: string, untilMs: number): void {
    this.remember(this.creationHolds, creationId, Math.max(untilMs, this.creationHolds.get(creationId) ?? 0));
  }

  /** Records that a poll of the creation was sent at `atMs`. */
  polled(creationId: string, atMs: number): void {
    this.remember(this.lastPoll, creationId, atMs);
  }

  /** When the creation was last polled by this process, if known. */
  lastPolledAt(creationId: string): number | undefined {
    return this.lastPoll.get(creationId);
  }

  /** The poll interval this process has learnt from 429s on polls (0 until one is seen). */
  get pollIntervalMs(): number {
    return this.learnedPollIntervalMs;
  }

  /** Raises the learnt poll interval (never lowers it), at most to `capMs`. */
  learnPollInterval(ms: number, capMs: number): void {
    this.learnedPollIntervalMs = Math.max(this.learnedPollIntervalMs, Math.min(ms, capMs));
  }

  private remember(map: Map<string, number>, id: string, value: number): void {
    map.delete(id);
    map.set(id, value);
    if (map.size > this.maxEntries) {
      const oldest = map.keys().next();
      if (!oldest.done) map.delete(oldest.value);
    }
  }
}

function getOrAdd<V>(map: Map<string, V>, id: string, make: () => V): V {
  let value = map.get(id);
  if (value === undefined) map.set(id, (value = make()));
  return value;
}

function left(map: Map<string, number>, id: string, nowMs: number): number {
  const until = map.get(id);
  if (until === undefined) return 0;
  if (until <= nowMs) {
    map.delete(id);
    return 0;
  }
  return until - nowMs;
}

/**
 * A token bucket for sub-second pacing of one process's requests: `take()` reserves a token and says how long
 * to wait for it. Callers sleep only short waits; a longer one is given back with `refund()` and becomes an
 * activity retry instead.
 */
export class Pacer {
  private tokens: number;
  private updatedAt: number;

  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
    nowMs: number,
  ) {
    this.tokens = burst;
    this.updatedAt = nowMs;
  }

  /** Takes a token; returns the milliseconds until it is due (0: go now). */
  take(nowMs: number): number {
    const elapsed = Math.max(0, nowMs - this.updatedAt);
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.ratePerSec) / 1000);
    this.updatedAt = nowMs;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.ratePerSec);
  }

  /** Gives back a token taken by {@link take} that will not be used. */
  refund(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }
}
