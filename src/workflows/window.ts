import {
  type BindingLimit,
  LIMIT_MEMORY_MS,
  WINDOW_DEFAULTS,
  type WindowOptions,
  type WindowState,
  type WindowView,
} from '../model';

/**
 * The batch's window of rows in flight (see src/model/window.ts), a plain class over its JSON state so that it is
 * tested without Temporal. Deterministic: it reads only what it is given (the limit a row reported, workflow time).
 *
 * - Additive increase: a row that ends with no limit binding adds one row to the window below the threshold (slow
 *   start, the window doubles each round) and 1/size above it (one row per window of rows).
 * - Multiplicative decrease: a row that reports a binding limit cuts the window to `decrease` of it (the threshold
 *   too), at most once per LIMIT_MEMORY_MS: a worker reports a limit for that long after it met it, so later reports
 *   within it are the same event, not a new one. Reports within it add nothing either.
 * - Under the `sawtooth` rule (WindowState.rule), only a report of the service's own 429 cuts, and only a window
 *   grown back to the size of the last cut; any other report of a limit (the worker's pace or quota gate holding
 *   rows) holds the window where it is, and a row with room grows it, at a row each up to the last cut.
 * - Never above the ceiling nor below the floor.
 */
export class AdaptiveWindow {
  constructor(readonly state: WindowState) {}

  /** The window of a batch that starts now: at `initial` (clamped), with no threshold yet. */
  static start(options: WindowOptions = {}, rule?: WindowState['rule']): WindowState {
    const ceiling = Math.max(1, Math.floor(options.ceiling ?? WINDOW_DEFAULTS.ceiling));
    const floor = Math.min(ceiling, Math.max(1, Math.floor(options.floor ?? WINDOW_DEFAULTS.floor)));
    const initial = Math.min(ceiling, Math.max(floor, Math.floor(options.initial ?? WINDOW_DEFAULTS.initial)));
    const decrease = Math.min(0.95, Math.max(0.1, options.decrease ?? WINDOW_DEFAULTS.decrease));
    return { size: initial, threshold: ceiling, ceiling, floor, decrease, ...(rule ? { rule } : {}) };
  }

  /** Rows in flight allowed now: a whole number, between the floor and the ceiling. */
  get size(): number {
    return Math.min(this.state.ceiling, Math.max(this.state.floor, Math.floor(this.state.size)));
  }

  /**
   * A row ended: `limit` is what it reported of the limit binding its worker (none, or `open`: room); `refused`, that
   * the service itself answered its worker a 429 lately (the sawtooth rule cuts only then).
   */
  rowEnded(limit: BindingLimit | undefined, nowMs: number, refused = false): void {
    const s = this.state;
    const cut = s.cut;
    const binds = limit === 'rate' || limit === 'concurrency';
    if (s.rule === 'sawtooth') {
      // Below where it was last cut, a limit that still binds holds the window where it is: rows wait in the
      // workers for the pace or the quota, so more would only wait longer, and fewer could leave the limit idle.
      if (!binds) return this.grow();
      if (refused && (cut?.from === undefined || this.size >= cut.from)) this.cutFor(limit, nowMs);
      return;
    }
    const recent = cut !== undefined && nowMs - cut.atMs < LIMIT_MEMORY_MS;
    if (recent) return;
    if (binds) return this.cutFor(limit, nowMs);
    this.grow();
  }

  private cutFor(limit: Exclude<BindingLimit, 'open'>, nowMs: number): void {
    const s = this.state;
    const from = this.size;
    s.size = Math.max(s.floor, from * s.decrease);
    // Under the sawtooth rule, rows with room bring it back to where it was cut at a row each (slow start), then on
    // by one row per window of rows.
    s.threshold = s.rule === 'sawtooth' ? from : s.size;
    s.cut = s.rule === 'sawtooth' ? { limit, atMs: nowMs, from } : { limit, atMs: nowMs };
  }

  /** Slow start below the threshold (one row a row), then one row per window of rows. */
  private grow(): void {
    const s = this.state;
    s.size = Math.min(s.ceiling, s.size < s.threshold ? s.size + 1 : s.size + 1 / s.size);
  }

  /** The window for the progress line. */
  view(nowMs: number): WindowView {
    const s = this.state;
    const boundBy =
      s.cut && nowMs - s.cut.atMs < LIMIT_MEMORY_MS ? s.cut.limit : this.size >= s.ceiling ? 'ceiling' : undefined;
    return { size: this.size, ceiling: s.ceiling, ...(boundBy ? { boundBy } : {}) };
  }
}
