import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { lazyClient, type Logger } from '../api/client';
import type { ApiKeyProvider } from '../api/api-key';
import type { HoldRegistry } from '../api/holds';
import type { ServiceConfig } from '../api/service-config';
import type { LedgerKey, LedgerStore } from '../ledger';
import {
  KeyOutcome,
  type LedgerCheckFinding,
  type LedgerCheckInput,
  type LedgerCheckPage,
  type PollCreationResult,
} from '../model';
import { toApplicationFailure } from './failures';
import { currentDetails, heartbeat, whileHeartbeating } from './heartbeat';
import { refuseOtherStore } from './key-ledger';
import { asRecord } from '../api/outcome-text';

/** A cost that differs by this much (USD) or more is a difference: the store keeps what the service said. */
const CENT = 0.005;

export interface LedgerCheckDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  dispatcher?: Dispatcher;
  holds?: HoldRegistry;
  now: () => number;
  logger: Logger;
  ledger: LedgerStore;
}

/**
 * `imagebatch ledger check`: the store against the service, key by key. Each key whose creation the store knows is
 * looked up by that creation's id (a GET: nothing is sent that could be charged, never a submission). A key with no
 * creation known cannot be asked by id; it is counted, and `reconcile` is what resolves it.
 */
export function createLedgerCheckActivities(deps: LedgerCheckDeps) {
  const api = lazyClient(deps);

  return {
    /**
     * One page of keys checked. A wait the service asks for (429, a local hold) or an unreadable answer ends the
     * attempt; the next attempt goes on from the key it stopped at (its heartbeat details), after the wait.
     */
    async checkLedgerKeys(input: LedgerCheckInput): Promise<LedgerCheckPage> {
      const ctx = Context.current();
      refuseOtherStore(deps.ledger, input.storeId, 'the command reads');
      const page = await deps.ledger.keys(input.after, input.max, input.batchId);
      const done = asRecord(currentDetails(ctx));
      const result: LedgerCheckPage = {
        checked: 0,
        agree: 0,
        withoutCreation: 0,
        findings: [],
        next: page.next,
        done: page.done,
        ...(typeof done.result === 'object' ? (done.result as Partial<LedgerCheckPage>) : {}),
      };
      const from = typeof done.index === 'number' ? done.index : 0;
      for (let i = from; i < page.keys.length; i++) {
        heartbeat(ctx, { index: i, result });
        const key = page.keys[i]!;
        if (!key.creationId) {
          result.withoutCreation += 1;
          continue;
        }
        const outcome = await whileHeartbeating(ctx, api().getCreation(key.creationId, ctx.cancellationSignal));
        switch (outcome.kind) {
          case 'ended':
          case 'inFlight':
          case 'notFound': {
            result.checked += 1;
            const finding = compare(key, outcome.kind === 'ended' ? outcome.result : outcome.kind);
            if (finding) result.findings.push(finding);
            else result.agree += 1;
            break;
          }
          case 'rateLimited':
          case 'batchStop':
          case 'config':
            throw toApplicationFailure(outcome);
          case 'ambiguous':
          case 'notSent':
          case 'malformed':
            throw toApplicationFailure(outcome, deps.config.backoffBaseMs);
          case 'accepted':
          case 'models':
          case 'refunded':
          case 'rejected':
            throw toApplicationFailure({ kind: 'malformed', lastError: `unexpected ${outcome.kind} answer to a poll` });
        }
      }
      return result;
    },
  };
}

/** How the service's answer for a key's creation differs from the store, or undefined when they agree. */
export function compare(
  key: LedgerKey,
  service: PollCreationResult | 'inFlight' | 'notFound',
): LedgerCheckFinding | undefined {
  const finding = (problem: string): LedgerCheckFinding => ({
    batchId: key.batchId,
    rowId: key.rowId,
    idempotencyKey: key.idempotencyKey,
    ...(key.creationId ? { creationId: key.creationId } : {}),
    problem,
  });
  const stored = key.ended?.outcome;
  if (service === 'notFound') return finding(`the service does not know creation ${key.creationId}`);
  if (service === 'inFlight') {
    return stored === KeyOutcome.Succeeded || stored === KeyOutcome.Failed
      ? finding(`the store says the creation ${stored}, the service that it is still in flight`)
      : undefined;
  }
  if (service.outcome === 'succeeded' && stored === KeyOutcome.Failed) {
    return finding('the store says the creation failed (refunded), the service that it succeeded');
  }
  if (service.outcome === 'failed' && stored === KeyOutcome.Succeeded) {
    return finding(`the store says the creation succeeded, the service that it failed (${service.error})`);
  }
  if (stored === undefined || stored === KeyOutcome.Accepted || stored === KeyOutcome.TimedOut) {
    return finding(
      `the creation has ended (${service.outcome}), the store does not know it yet: imagebatch reconcile ${key.batchId}`,
    );
  }
  if (service.costUsd !== undefined && key.costUsd !== undefined && Math.abs(service.costUsd - key.costUsd) >= CENT) {
    return finding(`the store says it cost $${key.costUsd}, the service $${service.costUsd}`);
  }
  return undefined;
}
