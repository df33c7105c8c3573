import { DEMO_API_KEY, type GenerationShape, type SimulatorConfigInput } from '../../src/simulator';

/**
 * Settings shared by the benchmarks: one account with a wallet that never runs dry and, unless a benchmark sets
 * one, no per-account concurrency cap, so that the limits a benchmark measures are the ones it sets.
 */

/** Generation time (queued + running) in ms: uniform in [min, max], or log-normal clipped to it. */
export interface GenerationSettings {
  min: number;
  max: number;
  /** @default 'uniform' */
  shape?: GenerationShape;
  /**
   * Median generation time when log-normal.
   * @default the simulator's: the geometric middle of the running range
   */
  medianMs?: number;
  /**
   * Standard deviation of ln(running time) when log-normal.
   * @default the simulator's (0.75)
   */
  sigma?: number;
}

/** Options of {@link simulatorSettings}. */
export interface SimSettings {
  generationMs: GenerationSettings;
  /**
   * Generation times of their own, by model id (the others take `generationMs`).
   * @default none
   */
  models?: Readonly<Record<string, GenerationSettings>>;
  /**
   * Requests per second per key (token bucket; burst the same).
   * @default unlimited
   */
  requestsPerSecond?: number;
  /**
   * Minimum interval between polls of one creation.
   * @default 0
   */
  minPollIntervalMs?: number;
  /**
   * Fault probabilities (`internal_after_charge`, `reset_after_commit`, ...).
   * @default none
   */
  faults?: Record<string, number>;
  /**
   * Creations in flight per account: a submission beyond it is answered `429 ERR_QUOTA_EXCEEDED` with Retry-After.
   * @default unlimited
   */
  accountConcurrency?: number;
}

const UNLIMITED = 1e9;

/** The simulator's timing for one generation setting. */
function timing(g: GenerationSettings) {
  // A quarter of the shortest generation time queued, the rest running: the total spans [min, max].
  const queued = Math.floor(g.min / 4);
  return {
    queuedMs: { minMs: queued, maxMs: queued },
    runningMs: { minMs: g.min - queued, maxMs: g.max - queued },
    ...(g.shape ? { shape: g.shape } : {}),
    ...(g.medianMs !== undefined ? { medianMs: g.medianMs - queued } : {}),
    ...(g.sigma !== undefined ? { sigma: g.sigma } : {}),
  };
}

/** The simulator's configuration for a benchmark. */
export function simulatorSettings(s: SimSettings): SimulatorConfigInput {
  return {
    generation: {
      ...timing(s.generationMs),
      ...(s.models
        ? { models: Object.fromEntries(Object.entries(s.models).map(([model, g]) => [model, timing(g)])) }
        : {}),
    },
    limits: {
      requestsPerSecond: s.requestsPerSecond ?? UNLIMITED,
      burst: Math.max(1, Math.round(s.requestsPerSecond ?? UNLIMITED)),
      minPollIntervalMs: s.minPollIntervalMs ?? 0,
      accountConcurrency: s.accountConcurrency ?? null,
    },
    accounts: [{ id: 'bench', walletUsd: 1e9, keys: [{ id: 'bench-key', key: DEMO_API_KEY }] }],
    idempotency: { maxEntries: 1_000_000 },
    creations: { maxEntries: 1_000_000 },
    ...(s.faults ? { faults: { probabilities: s.faults } } : {}),
  };
}
