import type { Context } from '@temporalio/activity';

/**
 * Heartbeats of the activities that wait on the network.
 *
 * Why: an activity that sends no heartbeat while a request is in flight can only be declared lost by its
 * start-to-close timeout, so a worker killed mid-request held its row for a minute. With a short heartbeat
 * timeout and a heartbeat every few seconds while anything is awaited, a dead worker's attempt is retried within
 * seconds, and a cancelled row's activity learns of the cancellation (it is delivered with heartbeats).
 *
 * The server keeps only the details of the last heartbeat, and hands them to the next attempt: an empty
 * heartbeat would erase what an earlier attempt left there (the count of unknown outcomes of a submission).
 * So every heartbeat goes through {@link heartbeat} here, which remembers the details of this attempt, and the
 * periodic ones re-send the latest details, or those of the previous attempt when this one has set none.
 */

/**
 * How often an activity heartbeats while it waits. The SDK sends at most one heartbeat per 80 % of the heartbeat
 * timeout to the server and keeps the latest details in between, so beating more often costs nothing on the wire.
 */
export const HEARTBEAT_EVERY_MS = 5_000;

/** The details each running attempt has set, by its context (gone with the context). */
const latest = new WeakMap<Context, { details: unknown }>();

/** The details the next heartbeat of this attempt carries: its own latest, or those of the previous attempt. */
export function currentDetails(ctx: Context): unknown {
  const own = latest.get(ctx);
  return own ? own.details : ctx.info.heartbeatDetails;
}

/** Heartbeats `details` and remembers them for the periodic heartbeats of {@link whileHeartbeating}. */
export function heartbeat(ctx: Context, details: unknown): void {
  latest.set(ctx, { details });
  ctx.heartbeat(details);
}

/**
 * Awaits `work`, heartbeating the current details every `everyMs` until it settles (fulfilled or rejected).
 * Returns (or throws) what `work` does.
 */
export async function whileHeartbeating<T>(
  ctx: Context,
  work: Promise<T>,
  everyMs: number = HEARTBEAT_EVERY_MS,
): Promise<T> {
  const timer = setInterval(() => ctx.heartbeat(currentDetails(ctx)), everyMs);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}
