import type { FaultSettings, LimitsPatch } from '../../src/simulator';

/** Messages between the bench and its simulator host process (see sim-host.ts). */

export type SimHostRequest =
  | { id: number; op: 'report' }
  | { id: number; op: 'setFaults'; faults: Partial<FaultSettings> }
  /** Changes the service's limits as it runs (the rate, its burst, the account's quota...): `sim.setLimits`. */
  | { id: number; op: 'setLimits'; limits: LimitsPatch }
  /** A cheap snapshot of running counts ({@link SimCounters}), for sampling every second. */
  | { id: number; op: 'counters' }
  /** The time (ms since the epoch) of the first API request that arrived at or after `since`, or null. */
  | { id: number; op: 'firstRequestAfter'; since: number }
  | { id: number; op: 'close' };

export type SimHostResponse = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

/** Running counts of the simulator host at one instant: a sampler turns two of them into rates. */
export interface SimCounters {
  /** When they were read (ms since the epoch, the host's clock). */
  at: number;
  /** Answers so far, every status (0 = reset) included; 0 without the counting proxy. */
  requests: number;
  /** Of those, 429s (any reason). */
  tooMany: number;
  /** Creations accepted and not yet ended (generating): the slots of the account's quota they hold. */
  creationsInFlight: number;
}

/** What the simulator host saw (wire counts only when it counts). */
export interface SimHostReport {
  /** Answers by HTTP status; 0 = the connection was reset. */
  statuses: Record<string, number>;
  tooManyByReason: Record<string, number>;
  requests: number;
  posts: number;
  /** GET /models requests: the catalog look-ups of the client. */
  catalogRequests: number;
  /**
   * GET /creations/{id} answered 200 with a status that is not an end (queued or running): a request slot spent
   * on a creation that was not ready.
   */
  runningPolls: number;
  firstRequestAt: number | undefined;
  lastRequestAt: number | undefined;
  /** Creations the charge book knows of (each was charged once). */
  creations: number;
  /** Creations charged and not refunded. */
  netChargedCreations: number;
  /** Distinct prompts (rows) with at least one net charge. */
  chargedPrompts: number;
  /** Net charges beyond the first for the same prompt: a row paid more than once. */
  doubleCharges: number;
  /** Idempotency keys under which more than one creation stays charged (the charge book's own check). */
  chargedTwiceByKey: number;
  charges: number;
  refunds: number;
  netUsd: number;
  /** Mean time from acceptance to the end of the creations that ended. */
  meanGenerationMs: number;
  polledCreations: number;
  /** GET /creations/{id} per polled creation, 429s included. */
  meanPollsPerCreation: number;
  /** Of those, the polls that found the creation not yet ended ({@link runningPolls}), per polled creation. */
  meanRunningPollsPerCreation: number;
  /** ceil(generation time / minimum poll interval) + 1, averaged over the same creations. */
  meanReferencePolls: number;
  unexpectedErrors: number;
}
