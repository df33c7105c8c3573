import { FailureMessage } from '../api/contract';
import { mulberry32, type SeededRandom } from './random';

/**
 * Faults the simulator can inject into a submission. The first group acts on the HTTP exchange, the last
 * four make an accepted creation fail at generation time with one of the four published strings.
 */
export const FaultKind = {
  None: 'none',
  /** 500 ERR_INTERNAL before the charge is committed: nothing charged, no creation. */
  InternalBeforeCharge: 'internal_before_charge',
  /** 500 ERR_INTERNAL after the charge committed: charged, the creation exists and runs; the client sees 500. */
  InternalAfterCharge: 'internal_after_charge',
  /** The creation is accepted and charged, then the socket is reset: the client never sees the 202. */
  ResetAfterCommit: 'reset_after_commit',
  /** The normal response, sent late (`delayMs`). */
  Slow: 'slow',
  /** 502 ERR_GENERATION_FAILED: charged, then refunded in full before the response. */
  GenerationFailed: 'generation_failed_502',
  /** 503 ERR_PROVIDER_UNAVAILABLE with Retry-After: charged, refunded, the job never started. */
  ProviderUnavailable: 'provider_unavailable_503',
  FailSafety: 'fail_safety',
  FailNoImage: 'fail_no_image',
  FailTimedOut: 'fail_timed_out',
  FailGeneration: 'fail_generation',
} as const;
export type FaultKind = (typeof FaultKind)[keyof typeof FaultKind];

/** The kinds a probability can be given for (every kind but `none` and `slow`, which has its own roll). */
export const PROBABILISTIC_FAULTS = [
  FaultKind.InternalBeforeCharge,
  FaultKind.InternalAfterCharge,
  FaultKind.ResetAfterCommit,
  FaultKind.GenerationFailed,
  FaultKind.ProviderUnavailable,
  FaultKind.FailSafety,
  FaultKind.FailNoImage,
  FaultKind.FailTimedOut,
  FaultKind.FailGeneration,
] as const;
export type ProbabilisticFault = (typeof PROBABILISTIC_FAULTS)[number];

/** One injected fault. `delayMs` applies to `slow` only. */
export interface Fault {
  kind: FaultKind;
  delayMs?: number;
}

/** A scripted rule: submissions whose prompt contains `match` consume `faults` one by one, in order. */
export interface ScriptRule {
  match: string;
  faults: Fault[];
}

/** The generation-time failure string a fault forces, if any. */
export function forcedFailure(kind: FaultKind): FailureMessage | undefined {
  switch (kind) {
    case FaultKind.FailSafety:
      return FailureMessage.SafetyFilter;
    case FaultKind.FailNoImage:
      return FailureMessage.NoImage;
    case FaultKind.FailTimedOut:
      return FailureMessage.TimedOut;
    case FaultKind.FailGeneration:
      return FailureMessage.Failed;
    case FaultKind.None:
    case FaultKind.InternalBeforeCharge:
    case FaultKind.InternalAfterCharge:
    case FaultKind.ResetAfterCommit:
    case FaultKind.Slow:
    case FaultKind.GenerationFailed:
    case FaultKind.ProviderUnavailable:
      return undefined;
  }
}

/** Runtime-changeable probabilities of the fault roll. */
export interface FaultSettings {
  probabilities: Partial<Record<ProbabilisticFault, number>>;
  slow: { probability: number; delayMs: number };
  providerRetryAfterSeconds: number;
}

/** A script rule with how many of its faults have been consumed (what persistence saves). */
export interface ScriptPosition {
  match: string;
  faults: Fault[];
  consumed: number;
}

/**
 * Picks the fault of each submission: a scripted rule whose prompt matches and still has faults left wins
 * (one fault consumed per submission); otherwise one seeded roll over the configured probabilities.
 */
export class FaultPlan {
  private scripts: ScriptPosition[];
  /** Faults handed out since this process started, by kind (`none` too), for reports; not persisted. */
  private readonly injected = Object.fromEntries(Object.values(FaultKind).map((k) => [k, 0])) as Record<
    FaultKind,
    number
  >;

  constructor(
    public settings: FaultSettings,
    scripts: readonly ScriptRule[],
    private random: SeededRandom,
  ) {
    this.scripts = scripts.map((rule) => ({ match: rule.match, faults: [...rule.faults], consumed: 0 }));
  }

  /** Replaces (or adds) the rule for `match`, with a fresh queue of faults. */
  scriptFor(match: string, faults: readonly Fault[]): void {
    this.scripts = this.scripts.filter((rule) => rule.match !== match);
    this.scripts.push({ match, faults: [...faults], consumed: 0 });
  }

  clearScripts(): void {
    this.scripts = [];
  }

  /** Faults still queued per rule (for tests and the control endpoint). */
  pendingScripts(): ScriptRule[] {
    return this.scripts.map((rule) => ({ match: rule.match, faults: rule.faults.slice(rule.consumed) }));
  }

  /** Every rule with its position, and the roll generator's state: what a restart needs to go on. */
  saveState(): { scripts: ScriptPosition[]; random: number } {
    return {
      scripts: this.scripts.map((rule) => ({ ...rule, faults: [...rule.faults] })),
      random: this.random.state(),
    };
  }

  restoreState(state: { scripts: readonly ScriptPosition[]; random: number }): void {
    this.scripts = state.scripts.map((rule) => ({
      match: rule.match,
      faults: [...rule.faults],
      consumed: Math.min(rule.consumed, rule.faults.length),
    }));
    this.random = mulberry32(state.random);
  }

  /** A copy of the counts of faults handed out, by kind. */
  counts(): Record<FaultKind, number> {
    return { ...this.injected };
  }

  /** The fault for one submission that reached the charge step. */
  next(prompt: string): Fault {
    const fault = this.pick(prompt);
    this.injected[fault.kind] += 1;
    return fault;
  }

  private pick(prompt: string): Fault {
    for (const rule of this.scripts) {
      if (rule.consumed < rule.faults.length && prompt.includes(rule.match)) {
        return rule.faults[rule.consumed++] ?? { kind: FaultKind.None };
      }
    }
    const roll = this.random();
    let cumulative = 0;
    for (const kind of PROBABILISTIC_FAULTS) {
      cumulative += this.settings.probabilities[kind] ?? 0;
      if (roll < cumulative) return { kind };
    }
    const slow = this.settings.slow;
    if (slow.probability > 0 && this.random() < slow.probability) {
      return { kind: FaultKind.Slow, delayMs: slow.delayMs };
    }
    return { kind: FaultKind.None };
  }
}
