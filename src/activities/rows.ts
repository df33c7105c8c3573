import type { Client } from '@temporalio/client';
import type { RowLookup, RowSummaryLike } from './types';

/** Activities that ask Temporal about rows: used when a batch is started again over rows that exist. */
export function createRowActivities(deps: { temporalClient?: Client }) {
  return {
    /** Whether the row workflow `workflowId` is still running, or how it ended. */
    async lookupRow({ workflowId }: { workflowId: string }): Promise<RowLookup> {
      if (!deps.temporalClient) throw new Error('lookupRow needs a Temporal client (worker misconfigured)');
      const handle = deps.temporalClient.workflow.getHandle(workflowId);
      const description = await handle.describe();
      if (description.status.name === 'RUNNING') return { status: 'running' };
      if (description.status.name !== 'COMPLETED') return { status: 'closed' };
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
    },
  };
}
