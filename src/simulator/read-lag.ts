import { type SimulatorConfig } from './config';
import { type Creation } from './creations';
import { hash32, mulberry32, uniformInt } from './random';

/**
 * Reads that lag writes (config `readLagMs`): a service behind a distributed store answers a GET of a creation it has
 * just accepted `404 ERR_NOT_FOUND` until its store catches up. Each creation's lag is drawn once, from its own seeded
 * stream, so every poll of it sees the same lag, and a restart of the simulator too.
 */

/** How long after its acceptance a creation is not found yet (0 when reads do not lag). */
export function readLagOf(c: Pick<Creation, 'id'>, config: Pick<SimulatorConfig, 'seed' | 'readLagMs'>): number {
  const range = config.readLagMs;
  if (!range || range.maxMs === 0) return 0;
  return uniformInt(mulberry32(hash32(`${c.id}/read-lag`, config.seed)), range.minMs, range.maxMs);
}

/** Whether a GET of the creation at `now` still misses it. */
export function notReadable(
  c: Pick<Creation, 'id' | 'acceptedAt'>,
  now: number,
  config: Pick<SimulatorConfig, 'seed' | 'readLagMs'>,
): boolean {
  return now - c.acceptedAt < readLagOf(c, config);
}
