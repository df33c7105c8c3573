import { DEMO_API_KEY, type SimulatorConfigInput } from '../../src/simulator';

/**
 * Settings shared by the benchmarks: one account with a wallet that never runs dry and no per-account
 * concurrency cap, so that the limits a benchmark measures are the ones it sets.
 */

/** Options of {@link simulatorSettings}. */
export interface SimSettings {
  /** Generation time (queued + running) in ms, uniform in [min, max]. */
  generationMs: { min: number; max: number };
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
}

const UNLIMITED = 1e9;

/** The simulator's configuration for a benchmark. */
export function simulatorSettings(s: SimSettings): SimulatorConfigInput {
  // A quarter of the generation time queued, the rest running: the total spans [min, max].
  const queuedMax = Math.floor(s.generationMs.min / 4);
  return {
    generation: {
      queuedMs: { minMs: queuedMax, maxMs: queuedMax },
      runningMs: { minMs: s.generationMs.min - queuedMax, maxMs: s.generationMs.max - queuedMax },
    },
    limits: {
      requestsPerSecond: s.requestsPerSecond ?? UNLIMITED,
      burst: Math.max(1, Math.round(s.requestsPerSecond ?? UNLIMITED)),
      minPollIntervalMs: s.minPollIntervalMs ?? 0,
      accountConcurrency: null,
    },
    accounts: [{ id: 'bench', walletUsd: 1e9, keys: [{ id: 'bench-key', key: DEMO_API_KEY }] }],
    idempotency: { maxEntries: 1_000_000 },
    creations: { maxEntries: 1_000_000 },
    ...(s.faults ? { faults: { probabilities: s.faults } } : {}),
  };
}
