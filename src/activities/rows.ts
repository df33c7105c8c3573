import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { LedgerStore } from '../ledger';
import { lookupRowRecord, type RowLookup } from '../row-lookup/lookup';
import { whileHeartbeating } from './heartbeat';

/** Activities that ask Temporal about rows: a batch started again over rows that exist, or a row gone quiet. */
export function createRowActivities(deps: {
  temporalClient?: Client;
  outputRoot: string;
  now: () => number;
  ledger: LedgerStore;
}) {
  return {
    /**
     * Whether the row workflow `workflowId` still runs, or its record. A record rebuilt from history (the row was
     * terminated) is kept in the batch's ledger, as the row would have kept its own.
     */
    async lookupRow({ workflowId }: { workflowId: string }): Promise<RowLookup> {
      if (!deps.temporalClient) throw new Error('lookupRow needs a Temporal client (worker misconfigured)');
      const found = await whileHeartbeating(Context.current(), lookupRowRecord(deps.temporalClient, workflowId));
      if (found.status === 'closed' && found.rebuiltFor) {
        await deps.ledger.append([{ type: 'row', by: 'lookup', record: found.record }], deps.now());
      }
      return found;
    },
  };
}
