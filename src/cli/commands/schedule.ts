import type { Client, ScheduleDescription } from '@temporalio/client';
import { msToNumber } from '@temporalio/common/lib/time';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { scheduledBatchWorkflow, type ScheduledBatchWorkflowInput } from '../../workflows';
import { ID_PATTERN } from '../../workflows/keys';
import { validateBatchFile, type UserColumns } from '../../batch';
import { checkPricesForCap } from '../prices';

/** Overlap policies a person can choose (what happens when a run is due while the previous one runs). */
export const OVERLAP_POLICIES = [
  'skip',
  'buffer_one',
  'buffer_all',
  'cancel_other',
  'terminate_other',
  'allow_all',
] as const;
export type OverlapPolicyName = (typeof OVERLAP_POLICIES)[number];

export interface CreateScheduleOptions {
  client: Client;
  taskQueue: string;
  scheduleId: string;
  /** A file path the workers can read, or an http(s) URL. */
  source: string;
  outDir: string;
  /** A cron expression, or ... */
  cron?: string;
  /** ... an interval such as `1h` or `30 minutes`. */
  every?: string;
  /** @default 'skip' */
  overlap?: OverlapPolicyName;
  skipSucceeded?: boolean;
  defaultModel?: string;
  concurrency?: number;
  maxAttempts?: number;
  spendCapUsd?: number;
  /** Prices per image by model for models the catalog shows no price for (`--price`). */
  prices?: Record<string, number>;
  /** Create it paused. */
  paused?: boolean;
  /** Columns the user owns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
}

/** `imagebatch schedule create`: a Temporal Schedule that starts a fresh batch from the source on each tick. */
export async function createSchedule(options: CreateScheduleOptions): Promise<{ scheduleId: string }> {
  if (!ID_PATTERN.test(options.scheduleId)) {
    throw new Error(
      `schedule id ${JSON.stringify(options.scheduleId)} must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, not only dots`,
    );
  }
  if (!options.cron === !options.every) throw new Error('give exactly one of --cron and --every');
  const input: ScheduledBatchWorkflowInput = {
    scheduleId: options.scheduleId,
    source: options.source,
    outDir: options.outDir,
    skipSucceeded: options.skipSucceeded ?? false,
    ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
    ...(options.concurrency ? { concurrency: options.concurrency } : {}),
    ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
    ...(options.spendCapUsd === undefined ? {} : { spendCapUsd: options.spendCapUsd }),
    ...(options.prices ? { prices: options.prices } : {}),
    ...(options.userColumns ? { userColumns: options.userColumns } : {}),
  };
  // A cap is kept only with a price for every model: a local file is checked now (a URL's rows are held by each
  // run's batch until their price is known).
  if (options.spendCapUsd !== undefined && !/^https?:\/\//i.test(options.source)) {
    const report = await validateBatchFile(options.source, {
      ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
      ...(options.userColumns ? { userColumns: options.userColumns } : {}),
    });
    await checkPricesForCap(options.client, options.taskQueue, report.models, options.prices ?? {});
  }
  await options.client.schedule.create({
    scheduleId: options.scheduleId,
    spec: options.cron ? { cronExpressions: [options.cron] } : { intervals: [{ every: intervalMs(options.every!) }] },
    action: {
      type: 'startWorkflow',
      workflowType: scheduledBatchWorkflow,
      workflowId: `schedule/${options.scheduleId}`,
      taskQueue: options.taskQueue,
      args: [input],
    },
    policies: { overlap: overlapOf(options.overlap ?? 'skip') },
    state: { paused: options.paused ?? false, note: `imagebatch schedule for ${options.source}` },
  });
  return { scheduleId: options.scheduleId };
}

function intervalMs(every: string): number {
  let ms: number;
  try {
    ms = msToNumber(every as Parameters<typeof msToNumber>[0]);
  } catch {
    ms = NaN;
  }
  if (!Number.isFinite(ms) || ms < 1000)
    throw new Error(`--every ${JSON.stringify(every)} is not an interval such as 1h or "30 minutes"`);
  return ms;
}

function overlapOf(name: OverlapPolicyName) {
  switch (name) {
    case 'skip':
      return ScheduleOverlapPolicy.SKIP;
    case 'buffer_one':
      return ScheduleOverlapPolicy.BUFFER_ONE;
    case 'buffer_all':
      return ScheduleOverlapPolicy.BUFFER_ALL;
    case 'cancel_other':
      return ScheduleOverlapPolicy.CANCEL_OTHER;
    case 'terminate_other':
      return ScheduleOverlapPolicy.TERMINATE_OTHER;
    case 'allow_all':
      return ScheduleOverlapPolicy.ALLOW_ALL;
  }
}

export interface ScheduleSummary {
  scheduleId: string;
  paused: boolean;
  note?: string;
  nextRuns: string[];
  recentRuns: { scheduledAt: string; workflowId: string }[];
}

function summarize(d: ScheduleDescription): ScheduleSummary {
  return {
    scheduleId: d.scheduleId,
    paused: d.state.paused,
    ...(d.state.note ? { note: d.state.note } : {}),
    nextRuns: d.info.nextActionTimes.slice(0, 3).map((t) => t.toISOString()),
    recentRuns: d.info.recentActions.map((a) => ({
      scheduledAt: a.scheduledAt.toISOString(),
      workflowId: a.action.workflow.workflowId,
    })),
  };
}

export async function describeSchedule(client: Client, scheduleId: string): Promise<ScheduleSummary> {
  return summarize(await client.schedule.getHandle(scheduleId).describe());
}

export async function listSchedules(client: Client): Promise<{ scheduleId: string; paused: boolean }[]> {
  const out: { scheduleId: string; paused: boolean }[] = [];
  for await (const s of client.schedule.list()) out.push({ scheduleId: s.scheduleId, paused: s.state.paused });
  return out;
}

export const ScheduleAction = { Pause: 'pause', Unpause: 'unpause', Trigger: 'trigger', Delete: 'delete' } as const;
export type ScheduleAction = (typeof ScheduleAction)[keyof typeof ScheduleAction];

/**
 * `imagebatch schedule pause|unpause|trigger|delete ID`. A trigger follows the schedule's own overlap policy (the
 * SDK's default for a trigger is `allow_all`, which would start a run alongside a running one whatever the
 * schedule says).
 */
export async function controlSchedule(client: Client, scheduleId: string, action: ScheduleAction): Promise<void> {
  const handle = client.schedule.getHandle(scheduleId);
  switch (action) {
    case ScheduleAction.Pause:
      return handle.pause('paused from the command line');
    case ScheduleAction.Unpause:
      return handle.unpause('unpaused from the command line');
    case ScheduleAction.Trigger:
      return handle.trigger((await handle.describe()).policies.overlap);
    case ScheduleAction.Delete:
      return handle.delete();
  }
}
