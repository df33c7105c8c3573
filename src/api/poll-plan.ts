/**
 * When to poll a creation, learnt from the creations this process has seen (per model).
 *
 * The service shows nothing of how long a creation takes, so the plan learns it: one creation in
 * {@link PollPlanOptions.exploreEvery} (and every creation until {@link PollPlanOptions.minSamples} are known) is an
 * explorer, polled at the minimum interval (from half the learnt 5th percentile on, once learnt), so its end
 * brackets the generation time within one interval. Explorers are chosen by count, never by how long they take, so
 * their times are a fair sample.
 *
 * Which limit binds decides the timing (the {@link PollRegime}):
 * - `rate`: the key's request rate (a 429 ERR_RATE_LIMIT), or submissions queued in the task queue (its rate limit,
 *   set under the key's, or busy workers: polls are then no cheaper).
 *   A poll that finds the creation still running takes a request a submission could have used, so the first poll
 *   goes out late, at a high quantile of the generation time, and each later one at a quantile of the time left.
 * - `concurrency`: the account's quota of creations in flight (a 429 ERR_QUOTA_EXCEEDED). A finished creation that
 *   waits for its poll holds its row's place in the window, so polls go early: the first at a low quantile, then at
 *   the minimum interval.
 * - `open`: nothing seen binds; as `concurrency` (polls are cheap, latency is not).
 *
 * With nothing learnt, every delay is the minimum interval (the behaviour before the plan). No delay is ever under
 * the minimum interval, and none reaches past the key's maximum wait. Deterministic: the same calls in the same
 * order give the same delays.
 */
import { LIMIT_MEMORY_MS, type BindingLimit } from '../model';

/** An explorer's first poll goes out at half this quantile of the learnt times (never sooner than the interval). */
const EXPLORER_START_QUANTILE = 0.05;
/** How polls are timed: by the service's limit that binds, the task queue's lag counting as the rate's (see above). */
export type PollRegime = BindingLimit;

/** What holds keys back: the service's limits ({@link BindingLimit}), or Temporal's task queue. */
export type HeldBy = BindingLimit | 'queue';

/** What made a regime: a 429's reason, or the task queue holding activities back. */
export type ThrottleSignal = 'rate_limited' | 'quota_exceeded' | 'queue_lag' | 'paced' | 'gated';

/**
 * Signals read from this process's own timing or its own limits (the task queue's lag, the worker's learnt pace and
 * quota gate holding submissions back), which count only while they last (see `lastingSeconds`).
 */
const LASTING_SIGNALS = ['queue_lag', 'paced', 'gated'] as const satisfies readonly ThrottleSignal[];
type LastingSignal = (typeof LASTING_SIGNALS)[number];

export interface PollPlanOptions {
  /**
   * Explorers' generation times kept per model, the newest; the plan follows a service that speeds up or slows down.
   * @default 256
   */
  window: number;
  /**
   * Explorers' times needed before a model's polls leave the minimum interval.
   * @default 20
   */
  minSamples: number;
  /**
   * Once learnt, one creation in this many is an explorer.
   * @default 16
   */
  exploreEvery: number;
  /**
   * Quantile of the generation time at which polls go out when the key's rate binds.
   * @default 0.95
   */
  rateQuantile: number;
  /**
   * Quantile of the generation time of the first poll when the rate does not bind.
   * @default 0.1
   */
  earlyQuantile: number;
  /**
   * How long a throttle signal keeps its regime, in ms.
   * @default 30_000
   */
  regimeMemoryMs: number;
  /**
   * A lasting signal (the task queue's lag, this worker's pace or quota gate holding a submission back) binds while
   * it came in this many distinct seconds of the last {@link lastingMs}: a lag in a second or two is a burst
   * (matching releasing, at once, retries that fell due while the history service restarted), not a limit. A 429
   * is the service's own word and counts at once, for {@link regimeMemoryMs}.
   * @default 3
   */
  lastingSeconds: number;
  /**
   * The span over which a lasting signal is counted, in ms.
   * @default 10_000
   */
  lastingMs: number;
  /**
   * Most models remembered; the least recently used is forgotten first.
   * @default 64
   */
  maxModels: number;
}

export const DEFAULT_POLL_PLAN_OPTIONS: PollPlanOptions = {
  window: 256,
  minSamples: 20,
  exploreEvery: 16,
  rateQuantile: 0.95,
  earlyQuantile: 0.1,
  regimeMemoryMs: LIMIT_MEMORY_MS,
  lastingSeconds: 3,
  lastingMs: 10_000,
  maxModels: 64,
};

/** What the plan decided for one creation at its acceptance; kept with the key's progress across attempts. */
export interface PollTicket {
  /** Polled at the minimum interval, its end learnt from. */
  explore: boolean;
}

/** The limits a delay must keep. */
export interface PollBounds {
  /** The minimum interval between two polls of a creation (and from its acceptance to its first poll). */
  intervalMs: number;
  /** Time since the creation was accepted. */
  elapsedMs: number;
  /** The key's maximum wait from acceptance. */
  maxWaitMs: number;
}

interface ModelTimes {
  /** Upper bounds of explorers' generation times (ms), oldest first. */
  times: number[];
  /** Creations begun, for choosing explorers by count. */
  begun: number;
}

export class PollPlan {
  private readonly options: PollPlanOptions;
  private readonly models = new Map<string, ModelTimes>();
  private readonly lastSignal = new Map<ThrottleSignal, number>();
  /** For each lasting signal, the distinct seconds (whole seconds of the clock) it came in, newest last. */
  private readonly lastingSeconds = new Map<LastingSignal, number[]>();

  constructor(options: Partial<PollPlanOptions> = {}) {
    this.options = { ...DEFAULT_POLL_PLAN_OPTIONS, ...options };
  }

  /** A creation of `model` was accepted: is it an explorer? */
  begin(model: string): PollTicket {
    const m = this.model(model);
    m.begun += 1;
    const learning = m.times.length < this.options.minSamples;
    return { explore: learning || m.begun % this.options.exploreEvery === 0 };
  }

  /** An explorer's creation was found ended `byMs` after its acceptance (within one interval of its end). */
  observe(model: string, byMs: number): void {
    if (!Number.isFinite(byMs) || byMs < 0) return;
    const m = this.model(model);
    m.times.push(byMs);
    if (m.times.length > this.options.window) m.times.shift();
  }

  /** The service or the task queue throttled this process at `atMs`. */
  signal(kind: ThrottleSignal, atMs: number): void {
    this.lastSignal.set(kind, atMs);
    if (!LASTING_SIGNALS.some((k) => k === kind)) return;
    const seconds = this.lastingSeconds.get(kind as LastingSignal) ?? [];
    const second = Math.floor(atMs / 1000);
    if (seconds.at(-1) !== second) seconds.push(second);
    if (seconds.length > this.options.lastingSeconds) seconds.shift();
    this.lastingSeconds.set(kind as LastingSignal, seconds);
  }

  /** Whether a lasting signal came in {@link PollPlanOptions.lastingSeconds} distinct seconds lately. */
  private lasts(kind: LastingSignal, nowMs: number): boolean {
    const seconds = this.lastingSeconds.get(kind) ?? [];
    const oldest = seconds[0];
    return (
      seconds.length >= this.options.lastingSeconds &&
      oldest !== undefined &&
      nowMs - oldest * 1000 <= this.options.lastingMs
    );
  }

  /**
   * What holds keys back now: a quota 429 outranks the rate (a full quota is what the rate then waits on), and any
   * 429 outranks the task queue (whose lag may be its rate limit, set under the key's rate, or busy workers), which
   * counts only while it lasts ({@link PollPlanOptions.lastingSeconds}), as this worker's own pace and gate do.
   */
  heldBy(nowMs: number, memoryMs = this.options.regimeMemoryMs): HeldBy {
    const recent = (kind: ThrottleSignal) => {
      const at = this.lastSignal.get(kind);
      return at !== undefined && nowMs - at <= memoryMs;
    };
    if (recent('quota_exceeded') || this.lasts('gated', nowMs)) return 'concurrency';
    if (recent('rate_limited') || this.lasts('paced', nowMs)) return 'rate';
    if (this.lasts('queue_lag', nowMs)) return 'queue';
    return 'open';
  }

  /**
   * What holds keys back this moment: a 429 counts for {@link PollPlanOptions.lastingMs} only, as lasting signals
   * do. A row reports it to its batch's window, which is cut once per 429 and then held only while a limit still
   * binds (a 429's 30 s would hold it well under the limit).
   */
  heldNow(nowMs: number): HeldBy {
    return this.heldBy(nowMs, this.options.lastingMs);
  }

  /** Whether the service itself answered a 429 lately (within {@link PollPlanOptions.lastingMs}), not a probe's. */
  refusedNow(nowMs: number): boolean {
    return (['rate_limited', 'quota_exceeded'] as const).some((kind) => {
      const at = this.lastSignal.get(kind);
      return at !== undefined && nowMs - at <= this.options.lastingMs;
    });
  }

  /** The regime polls are timed by: {@link heldBy}, a task queue that holds keys back counting as the rate. */
  regime(nowMs: number): PollRegime {
    const held = this.heldBy(nowMs);
    return held === 'queue' ? 'rate' : held;
  }

  /**
   * How long to wait before the next poll of a creation of `model`: its first (`bounds.elapsedMs` at acceptance)
   * or a later one after a poll found it still running.
   */
  delay(model: string, ticket: PollTicket | undefined, bounds: PollBounds, nowMs: number): number {
    const { intervalMs, elapsedMs, maxWaitMs } = bounds;
    const times = this.models.get(model)?.times;
    let target = elapsedMs + intervalMs;
    const first = elapsedMs <= 0;
    if (ticket && times && times.length >= this.options.minSamples) {
      if (ticket.explore) {
        // An explorer still brackets its end within one interval, but skips the polls no creation has needed:
        // its first goes out at half the times' 5th percentile (half, so that a service that speeds up shows).
        if (first) target = quantile(sorted(times), EXPLORER_START_QUANTILE) / 2;
      } else if (this.regime(nowMs) === 'rate') {
        target = conditionalQuantile(times, elapsedMs, this.options.rateQuantile) ?? target;
      } else if (first) {
        target = quantile(sorted(times), this.options.earlyQuantile);
      }
    }
    // Never sooner than the interval; never past the maximum wait (unless the interval itself reaches past it: a
    // poll after the wait ends the key).
    const latest = Math.max(elapsedMs + intervalMs, maxWaitMs);
    const at = Math.min(Math.max(target, elapsedMs + intervalMs), latest);
    return Math.ceil(at - elapsedMs);
  }

  private model(id: string): ModelTimes {
    let m = this.models.get(id);
    if (m) {
      this.models.delete(id);
    } else {
      m = { times: [], begun: 0 };
      if (this.models.size >= this.options.maxModels) {
        const oldest = this.models.keys().next();
        if (!oldest.done) this.models.delete(oldest.value);
      }
    }
    this.models.set(id, m);
    return m;
  }
}

function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** The q-quantile (nearest rank) of ascending `values`, not empty. */
function quantile(values: readonly number[], q: number): number {
  const rank = Math.min(values.length - 1, Math.max(0, Math.ceil(q * values.length) - 1));
  return values[rank]!;
}

/** The q-quantile of the times above `elapsedMs` (what is left of a creation still running), if any is. */
function conditionalQuantile(times: readonly number[], elapsedMs: number, q: number): number | undefined {
  const left = sorted(times.filter((t) => t > elapsedMs));
  return left.length === 0 ? undefined : quantile(left, q);
}
