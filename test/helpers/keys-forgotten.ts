import { setTimeout as sleep } from 'node:timers/promises';
import type { Simulator } from '../../src/simulator';

/**
 * How long the simulators of the re-run tests remember an idempotency key (24 h in life): long enough for a canary's
 * check of its key, sent once its first answer is known, and short enough to wait out before a batch is run again.
 */
export const KEYS_KEPT_MS = 3_000;

/** Waits until `sim` has forgotten every key it charged: a key sent again from then on would be charged again. */
export async function keysForgotten(sim: Simulator): Promise<void> {
  const last = Math.max(0, ...sim.charges.entries().map((e) => e.at));
  await sleep(Math.max(0, last + KEYS_KEPT_MS - sim.clock.now()));
}
