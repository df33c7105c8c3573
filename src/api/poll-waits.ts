import { ErrorCode } from './contract';
import type { HoldRegistry } from './holds';
import type { Outcome, RateLimitedInfo } from './outcome';

/**
 * What an answer to a poll says of the creation's next poll, kept in this process (the client, `client.ts`). A
 * `Retry-After` on an answer that is still in flight holds the creation until then (the activity also waits it out,
 * durably, as its retry's delay: `src/activities/create-image/poll.ts`). A 429 for polling too soon holds the creation
 * and raises the poll interval learnt for every creation (`HoldRegistry.pollIntervalMs`).
 */

/** Ceiling of the poll interval learnt from 429s. */
export const MAX_LEARNT_POLL_INTERVAL_MS = 60_000;

/** A poll of `creationId` sent at `sentAtMs`, as its answer is judged. */
export interface PollSent {
  creationId: string;
  sentAtMs: number;
  /** When this process sent the poll before it, if it did. */
  previousPollAtMs: number | undefined;
  /** `IMAGEGEN_MIN_POLL_INTERVAL_MS`: how far the poll before it was at least, when another process sent it. */
  minPollIntervalMs: number;
  /** The poll interval in force when it was sent (the setting, or longer when learnt). */
  pollIntervalMs: number;
}

/** Notes in `holds` that the poll was sent; returns it with the poll before it. */
export function pollSent(
  holds: HoldRegistry,
  poll: Pick<PollSent, 'creationId' | 'sentAtMs' | 'minPollIntervalMs'>,
  pollIntervalMs: number,
): PollSent {
  const previousPollAtMs = holds.lastPolledAt(poll.creationId);
  holds.polled(poll.creationId, poll.sentAtMs);
  return { ...poll, previousPollAtMs, pollIntervalMs };
}

/** Holds the creation until the `Retry-After` of an answer that is still in flight, when it has one. */
export function inFlightHint(
  holds: HoldRegistry,
  outcome: Extract<Outcome, { kind: 'inFlight' }>,
  poll: PollSent,
  nowMs: number,
): void {
  if (outcome.retryAfterMs !== undefined) holds.holdCreation(poll.creationId, nowMs + outcome.retryAfterMs);
}

/**
 * A 429 on a poll: the creation is held until its `Retry-After`, and, unless it names another limit (the key's rate,
 * the account's quota), the poll interval learnt rises to the time since the poll before plus that wait. A poll before
 * it that another process sent (another worker, or this one before a restart) was at least the configured interval
 * earlier: the activity keeps every poll that far from the previous one (`save.ts`). A poll long after the one before
 * that is refused all the same says another limit binds (the key's rate), and teaches nothing of the interval.
 */
export function pollRefused(holds: HoldRegistry, outcome: RateLimitedInfo, poll: PollSent, nowMs: number): void {
  holds.holdCreation(poll.creationId, nowMs + outcome.retryAfterMs);
  if (namesAnotherLimit(outcome)) return;
  const { previousPollAtMs, sentAtMs } = poll;
  const since = previousPollAtMs === undefined ? poll.minPollIntervalMs : Math.max(0, sentAtMs - previousPollAtMs);
  if (since >= 2 * poll.pollIntervalMs) return;
  holds.learnPollInterval(since + outcome.retryAfterMs, MAX_LEARNT_POLL_INTERVAL_MS);
}

/** Whether a 429's code or details name a limit other than a creation's poll interval. */
function namesAnotherLimit(outcome: RateLimitedInfo): boolean {
  if (outcome.code === ErrorCode.QuotaExceeded) return true;
  const scope = outcome.scope?.toLowerCase();
  return scope === 'key' || scope === 'account';
}
