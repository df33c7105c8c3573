import type { BindingLimit } from '../model';
import { LocalHoldCode, type Logger } from './client';
import { ErrorCode } from './contract';
import type { HeldBy, PollBounds, PollPlan, PollRegime, PollTicket, ThrottleSignal } from './poll-plan';

/**
 * When a key's creation is polled, and which of the service's limits binds, as `createImage` asks it: the poll plan
 * (poll-plan.ts) fed with what this process sees (429s, its own pace and quota gate, the task queue's lag), and a line
 * in the log when what holds keys back changes. No Temporal: the activity passes in what its context says.
 */

/**
 * How late a key's first attempt may start after it was scheduled before the poll plan takes the task queue's rate
 * limit as binding: well above a worker's ordinary pick-up time, below the wait of a queue the limiter holds back.
 */
export const QUEUE_LAG_MS = 1_000;

/** A submission that the key's pace (or quota gate) held back this recently says that the key's rate (quota) binds. */
const HELD_LATELY_MS = 1_000;

/** What the worker's log says when what holds keys back changes. */
const HELD_TEXT: Readonly<Record<HeldBy | 'busy', string>> = {
  open: 'no limit holds keys back',
  rate: "the key's request rate binds (429)",
  concurrency: "the account's quota of creations in flight binds (429)",
  queue: "the key's request rate binds (keys wait in the task queue for its rate limit, IMAGEBATCH_RATE_LIMIT)",
  busy: "keys wait in Temporal's task queue: every worker is busy",
};
/** ...and, when learning, how creations are polled then. */
const POLLS_TEXT: Readonly<Record<PollRegime, string>> = {
  open: 'creations are polled early',
  rate: 'creations are polled late, when they are likely to have ended',
  concurrency: 'creations are polled early',
};

export interface PollTimingOptions {
  /** The plan: it always tells which limit binds (rows report it to their batch). */
  plan: PollPlan;
  /** Whether the plan times polls too (`IMAGEGEN_POLL_PLAN=learn`); otherwise every poll waits the interval. */
  learn: boolean;
  /** Whether the task queue has a rate limit: then a late first attempt means the key's rate binds. */
  taskQueueRateLimited: boolean;
  logger: Logger;
  now: () => number;
}

/** A submission held back: a 429 of the service, or this worker's own hold (see `ClientOutcome`). */
export interface HeldSubmission {
  httpStatus: number;
  code: string;
  local?: boolean;
  probe?: boolean;
}

export class PollTiming {
  /** What held keys back when last told to the log: a change is worth a line. */
  private told: HeldBy | 'busy' = 'open';

  constructor(private readonly options: PollTimingOptions) {}

  /** The plan's ticket of a creation just accepted, when the plan times polls. */
  begin(model: string): PollTicket | undefined {
    return this.options.learn ? this.options.plan.begin(model) : undefined;
  }

  /** An explorer's creation ended `byMs` after its acceptance (the plan learns from it, when it times polls). */
  observe(model: string, byMs: number): void {
    if (this.options.learn) this.options.plan.observe(model, byMs);
  }

  /**
   * The wait before the next poll of a key's creation: the poll plan's, within the poll interval (never sooner) and
   * the key's maximum wait. A creation accepted before this process knew it (`explore` undefined: no ticket) is polled
   * at the interval.
   */
  delay(model: string, explore: boolean | undefined, bounds: PollBounds): number {
    const now = this.options.now();
    this.bindingLimit(now);
    if (!this.options.learn) return bounds.intervalMs;
    const ticket = explore === undefined ? undefined : { explore };
    return this.options.plan.delay(model, ticket, bounds, now);
  }

  /**
   * The service's limit that binds now, for the row's report; a change of what holds keys back is worth a line in
   * the log. A task queue that holds keys back is the key's rate when it has a rate limit, else busy workers: no
   * limit of the service.
   */
  bindingLimit(now: number): BindingLimit {
    const { plan, learn, taskQueueRateLimited, logger } = this.options;
    const held = plan.heldNow(now);
    const seen = held === 'queue' && !taskQueueRateLimited ? 'busy' : held;
    if (seen !== this.told) {
      this.told = seen;
      const polls = learn ? `; poll plan: ${POLLS_TEXT[plan.regime(now)]}` : '';
      logger.info(`${HELD_TEXT[seen]}${polls}`, { heldBy: seen });
    }
    switch (seen) {
      case 'queue':
        return 'rate';
      case 'busy':
        return 'open';
      default:
        return seen;
    }
  }

  /** Whether the service's own 429s refused keys lately (the row tells its batch). */
  refusedNow(now: number): boolean {
    return this.options.plan.refusedNow(now);
  }

  /**
   * The task queue held a key's first attempt back longer than {@link QUEUE_LAG_MS} after it was scheduled: the
   * worker's rate limit (IMAGEBATCH_RATE_LIMIT, just under the key's rate) binds, which the poll plan counts as the
   * rate binding. Only first attempts: a retry's timer alone starts up to about a second late on the dev server
   * (seen: 780 ms after a 200 ms delay), while a first attempt waits only for the queue (3 to 50 ms seen).
   */
  noteQueueLag(attempt: number, scheduledAtMs: number): void {
    if (attempt !== 1) return;
    const lag = this.options.now() - scheduledAtMs;
    if (lag > QUEUE_LAG_MS) this.options.plan.signal('queue_lag', this.options.now());
  }

  /** A submission was accepted: a pace or quota gate that held submissions back lately says its limit binds. */
  noteAccepted(held: { pacedSince: (ms: number) => boolean; gatedSince: (ms: number) => boolean }): void {
    const { plan, now } = this.options;
    if (held.pacedSince(now() - HELD_LATELY_MS)) plan.signal('paced', now());
    if (held.gatedSince(now() - HELD_LATELY_MS)) plan.signal('gated', now());
  }

  /**
   * A submission was held back. Which limit binds decides when polls go out (poll-plan.ts). A 503's wait is neither.
   * The worker's own gate and pace, full, say the same limits bind as the 429s they keep away.
   */
  noteHeld(held: HeldSubmission): void {
    if (held.httpStatus === 429 || (held.local === true && held.code !== LocalHoldCode.Wait)) {
      this.options.plan.signal(throttleOf(held.code, held.probe === true), this.options.now());
    }
  }
}

/**
 * What a submission held back tells the plan: a 429 of the service, or this worker's own pace or quota gate holding
 * it (as does a 429 that answered the worker's probe above what it had learnt).
 */
function throttleOf(code: string, probe: boolean): ThrottleSignal {
  switch (code) {
    case ErrorCode.QuotaExceeded:
      return probe ? 'gated' : 'quota_exceeded';
    case ErrorCode.RateLimit:
      return probe ? 'paced' : 'rate_limited';
    case LocalHoldCode.Quota:
      return 'gated';
    case LocalHoldCode.Rate:
      return 'paced';
    default:
      return 'rate_limited';
  }
}
