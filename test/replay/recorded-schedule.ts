/**
 * The scheduled-run scenario of record-histories.ts (see that file for how fixtures are recorded).
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import {
  scheduledBatchWorkflow,
  type ScheduledBatchResult,
  type ScheduledBatchWorkflowInput,
} from '../../src/workflows';
import { SCHEDULED_RUN_ENDS } from '../../src/workflows/scheduled-run';
import { hasPatch } from './recorded-scenarios';

type Save = (name: string, handle: WorkflowHandle, runId?: string) => Promise<void>;

/**
 * A scheduled run held by its spend cap (patch `scheduled-run-ends`): its watch sees the batch paused with no row in
 * flight, the run ends the batch, writes its results and its line in runs.jsonl, and ends `paused`. Started as a
 * Schedule would start it (the workflow id `schedule/<id>-<time>`), without the Schedule.
 */
export async function recordScheduledCapPaused(ctx: {
  client: Client;
  taskQueue: string;
  outputRoot: string;
  save: Save;
}): Promise<void> {
  const file = path.join(ctx.outputRoot, 'scheduled.csv');
  await writeFile(file, 'id,prompt\na,a red kite over a beach\nb,a green tram in the fog\nc,a blue door\n');
  const run = await ctx.client.workflow.start(scheduledBatchWorkflow, {
    taskQueue: ctx.taskQueue,
    workflowId: 'schedule/replay-sched-2025-01-01T00:00:00Z',
    args: [
      { scheduleId: 'replay-sched', source: file, outDir: 'scheduled', defaultModel: 'flux-dev', spendCapUsd: 0.05 },
    ] as [ScheduledBatchWorkflowInput],
  });
  const result: ScheduledBatchResult = await run.result();
  if (result.outcome !== 'paused' || result.progress.counts.succeeded !== 1) {
    throw new Error(`scheduled run held by its cap: ${JSON.stringify(result)}`);
  }
  if (!hasPatch(await run.fetchHistory(), SCHEDULED_RUN_ENDS))
    throw new Error('scheduled run: no scheduled-run-ends marker');
  await ctx.save('scheduled-cap-paused', run);
}
