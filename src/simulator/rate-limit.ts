import { retryAfterSeconds } from './clock';

interface Bucket {
  tokens: number;
  updatedAt: number;
}

/**
 * A token bucket per key on the injected clock: `burst` tokens, refilled at `perSecond`. A refused request
 * takes no token, and its Retry-After is the time until one token is back.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    public perSecond: number,
    public burst: number,
  ) {}

  /** Takes a token; returns undefined when allowed, else the Retry-After in seconds. */
  take(keyId: string, now: number): number | undefined {
    let bucket = this.buckets.get(keyId);
    if (!bucket) {
      bucket = { tokens: this.burst, updatedAt: now };
      this.buckets.set(keyId, bucket);
    }
    const elapsed = Math.max(0, now - bucket.updatedAt);
    bucket.tokens = Math.min(this.burst, bucket.tokens + (elapsed / 1000) * this.perSecond);
    bucket.updatedAt = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    return retryAfterSeconds(((1 - bucket.tokens) / this.perSecond) * 1000);
  }
}
