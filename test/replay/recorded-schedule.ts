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
import { SCHEDULED_RUN_BUDGET, SCHEDULED_RUN_ENDS } from '../../src/workflows/scheduled-run';
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
  if (result.outcome !== 'paused' || result.progress?.counts.succeeded !== 1) {
    throw new Error(`scheduled run held by its cap: ${JSON.stringify(result)}`);
  }
  if (!hasPatch(await run.fetchHistory(), SCHEDULED_RUN_ENDS))
    throw new Error('scheduled run: no scheduled-run-ends marker');
  await ctx.save('scheduled-cap-paused', run);
}

/**
 * Two scheduled runs of one schedule with a budget of 0.04 USD a day (patch `scheduled-run-budget`): the first is
 * told all of it is left, so its batch's cap is 0.04, one row succeeds and the run ends `paused`; the second finds
 * the day's budget spent and ends `paused` before its batch starts.
 */
export async function recordScheduledBudget(ctx: {
  client: Client;
  taskQueue: string;
  outputRoot: string;
  save: Save;
}): Promise<void> {
  const file = path.join(ctx.outputRoot, 'budget.csv');
  await writeFile(file, 'id,prompt\na,a white owl at night\nb,a stone bridge in rain\n');
  const input: ScheduledBatchWorkflowInput = {
    scheduleId: 'replay-budget',
    source: file,
    outDir: 'budget',
    defaultModel: 'flux-dev',
    budget: { perDayUsd: 0.04, timezone: 'UTC' },
  };
  const start = (at: string) =>
    ctx.client.workflow.start(scheduledBatchWorkflow, {
      taskQueue: ctx.taskQueue,
      workflowId: `schedule/replay-budget-${at}`,
      args: [input] as [ScheduledBatchWorkflowInput],
    });
  const first = await start('2025-01-01T00:00:00Z');
  const capped: ScheduledBatchResult = await first.result();
  if (capped.outcome !== 'paused' || capped.progress?.counts.succeeded !== 1) {
    throw new Error(`scheduled run capped by its budget: ${JSON.stringify(capped)}`);
  }
  const second = await start('2025-01-01T01:00:00Z');
  const spent: ScheduledBatchResult = await second.result();
  if (spent.outcome !== 'paused' || spent.progress !== undefined) {
    throw new Error(`scheduled run with its budget spent: ${JSON.stringify(spent)}`);
  }
  for (const run of [first, second]) {
    if (!hasPatch(await run.fetchHistory(), SCHEDULED_RUN_BUDGET)) {
      throw new Error('scheduled run: no scheduled-run-budget marker');
    }
  }
  await ctx.save('scheduled-budget-capped', first);
  await ctx.save('scheduled-budget-spent', second);
}
