/**
 * The simulator's only source of time. Every time-dependent rule (creation progress, token buckets, the
 * polling interval, idempotency and creation expiry, the monthly budget) reads this clock, never
 * `setTimeout`, so that tests can drive the simulator with Temporal's time-skipping clock or a manual one.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** Real time. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to: for tests that must not wait in real time. */
export class ManualClock implements Clock {
  constructor(private current = Date.UTC(2026, 10, 21, 10, 0, 0)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

/** `Retry-After` in whole seconds, at least 1 (contract-defaults.md), for a wait of `ms` milliseconds. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
