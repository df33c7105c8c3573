import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { collectResults } from '../results';
import { prepareScheduledInput, recordSucceededIds, type PreparedInput } from '../schedules/prepare';
import { whileHeartbeating } from './heartbeat';

export interface PrepareScheduledRunInput {
  source: string;
  /** The schedule's output folder (as the worker sees it); each run gets a folder of its own below it. */
  outDir: string;
  batchId: string;
  skipSucceeded: boolean;
  defaultModel?: string;
}

/**
 * Activities of scheduled runs: make a run's input, and remember which rows succeeded. Both heartbeat while they
 * work (a download of the source, reading every row's result), as their heartbeat timeout expects.
 */
export function createScheduleActivities(deps: { outputRoot: string; temporalClient?: Client }) {
  const succeededFile = (outDir: string) => path.join(path.resolve(deps.outputRoot, outDir), 'succeeded-ids.txt');
  return {
    async prepareScheduledRun(input: PrepareScheduledRunInput): Promise<PreparedInput> {
      const ctx = Context.current();
      const outDir = path.resolve(deps.outputRoot, input.outDir);
      const prepared = prepareScheduledInput({
        source: /^https?:\/\//i.test(input.source) ? input.source : path.resolve(deps.outputRoot, input.source),
        runDir: path.join(outDir, input.batchId),
        succeededIdsFile: succeededFile(input.outDir),
        skipSucceeded: input.skipSucceeded,
        ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
      });
      return whileHeartbeating(ctx, prepared);
    },

    /** Appends the ids of the rows of `batchId` that succeeded to the schedule's record. */
    async recordSucceededRows(input: { outDir: string; batchId: string; file: string }): Promise<number> {
      if (!deps.temporalClient) throw new Error('recordSucceededRows needs a Temporal client (worker misconfigured)');
      const client = deps.temporalClient;
      const record = async () => {
        const rows = await collectResults({ client, batchId: input.batchId, file: input.file });
        const ids = rows.filter((r) => r.state === 'succeeded').map((r) => r.row.rowId);
        await recordSucceededIds(succeededFile(input.outDir), ids);
        return ids.length;
      };
      return whileHeartbeating(Context.current(), record());
    },
  };
}
