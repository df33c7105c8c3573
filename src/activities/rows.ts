import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { whileHeartbeating } from './heartbeat';
import type { RowLookup, RowSummaryLike } from './types';

/**
 * What {@link createRowActivities}' `lookupRow` answers: a row that closed without completing (terminated or
 * cancelled by hand, failed, timed out) also says how, so that a batch can count it.
 */
export type RowLookupResult = RowLookup & { closedAs?: string };

/** Activities that ask Temporal about rows: a batch started again over rows that exist, or a row gone quiet. */
export function createRowActivities(deps: { temporalClient?: Client }) {
  return {
    /** Whether the row workflow `workflowId` is still running, or how it ended. */
    async lookupRow({ workflowId }: { workflowId: string }): Promise<RowLookupResult> {
      if (!deps.temporalClient) throw new Error('lookupRow needs a Temporal client (worker misconfigured)');
      const client = deps.temporalClient;
      return whileHeartbeating(Context.current(), lookup(client, workflowId));
    },
  };
}

async function lookup(client: Client, workflowId: string): Promise<RowLookupResult> {
  const handle = client.workflow.getHandle(workflowId);
  const description = await handle.describe();
  const status = description.status.name;
  if (status === 'RUNNING') return { status: 'running' };
  if (status !== 'COMPLETED') return { status: 'closed', closedAs: status };
  const result = (await handle.result()) as Partial<RowSummaryLike> & { attempts?: unknown };
  return {
    status: 'closed',
    summary: {
      rowId: String(result.rowId ?? ''),
      state: String(result.state ?? 'failed'),
      chargedUsd: Number(result.chargedUsd ?? 0),
      refundedUsd: Number(result.refundedUsd ?? 0),
      attempts: Array.isArray(result.attempts) ? result.attempts.length : 0,
    },
  };
}
