import type { BindingLimit } from './limits';

/**
 * A batch's window: how many of its rows may be in flight. The service shows neither the key's request rate nor the
 * account's quota of creations in flight, so the window finds them, as TCP's congestion control finds a path's
 * capacity: it grows while rows end with no limit binding, and shrinks when a row reports one (a 429 of the quota or
 * the rate, or the task queue's rate limit holding keys back). The batch workflow keeps it (src/workflows/window.ts).
 */

/** The window's bounds and steps. `run --concurrency N` starts it at N and keeps it at most N. */
export interface WindowOptions {
  /**
   * Rows in flight at the start. A batch run with `--concurrency N` starts at N.
   * @default 8
   */
  initial?: number;
  /**
   * Rows in flight at most (`run --concurrency`). Each row in flight is a workflow and a place in the batch's state.
   * @default 256
   */
  ceiling?: number;
  /** Rows in flight at least, whatever the service says. @default 1 */
  floor?: number;
  /**
   * The share of the window kept when a row reports a binding limit (multiplicative decrease). 0.7 as CUBIC's: a
   * quota above the window costs nothing but a few 429s (free, waited out), so halving would leave slots empty.
   * @default 0.7
   */
  decrease?: number;
}

/** The defaults of {@link WindowOptions}, said once. */
export const WINDOW_DEFAULTS = { initial: 8, ceiling: 256, floor: 1, decrease: 0.7 } as const;

/** The window as the batch's state carries it (through continue-as-new): plain JSON. */
export interface WindowState {
  /** Rows in flight allowed now; a real number, so that growing by 1/size a row adds one row per window. */
  size: number;
  /** Below it, each row that ends with room adds one (slow start); at or above it, one per window's worth of rows. */
  threshold: number;
  ceiling: number;
  floor: number;
  decrease: number;
  /**
   * The last decrease: its limit, when (workflow time) and from what size. Under the first rule, reports within the
   * limit's memory are the same event; under `sawtooth`, reports below the size it was cut from are.
   */
  cut?: { limit: Exclude<BindingLimit, 'open'>; atMs: number; from?: number };
  /**
   * How reports cut it. Absent (the first rule): at most once per limit memory, with no growth within it. That rule
   * starves under a limit that binds for good: a worker that keeps under the limit (its pace and quota gate) reports
   * it all the time, and the window shrinks by 0.7 every 30 s to its floor. `sawtooth`: a report cuts only a window
   * that has grown back to the size of the last cut, and holds a smaller one where it is; rows that end with room
   * grow it.
   */
  rule?: 'sawtooth';
}
