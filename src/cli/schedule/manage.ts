import { type Client, type ScheduleDescription, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { scheduledBatchWorkflow, type ScheduledBatchWorkflowInput } from '../../workflows';
import { ID_PATTERN, type ScheduleBudget, type UserColumns } from '../../model';
import type { BatchReport } from '../../batch';
import { ID_RULE } from '../options';
import { checkPricesForCap } from '../prices';
import { DEFAULT_JITTER_MS, DEFAULT_TIMEZONE, defaultCatchupWindowMs, intervalOf } from './guards';
import { checkScheduleSource } from './source';
import { timingOf, whenMemo, type ScheduleTiming } from './timing';

/** The schedules themselves, as the `schedule` commands make, show and control them (no output of their own). */

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

/**
 * What each run of a schedule asks for. `all`: every row of the file, as new images (a pipeline that runs again to
 * get new ones). `new`: only the requests no earlier run of the schedule may have paid for (new and changed rows,
 * known by what they ask, not by id or line); a request paid for elsewhere (another batch) is served from the store.
 */
export const EACH_RUN = ['all', 'new'] as const;
export type EachRun = (typeof EACH_RUN)[number];
export const DEFAULT_EACH_RUN: EachRun = 'all';

/** When a schedule runs: a cron expression, or an interval (at least a second; the CLI checks it). */
export type ScheduleSpec = { cron: string; every?: never } | { every: Duration; cron?: never };

export type CreateScheduleOptions = ScheduleSpec & CreateScheduleSettings;

export interface CreateScheduleSettings {
  client: Client;
  taskQueue: string;
  scheduleId: string;
  /** A file path the workers can read, or an http(s) URL. */
  source: string;
  outDir: string;
  /** @default 'skip' */
  overlap?: OverlapPolicyName;
  /** @default 'all' */
  eachRun?: EachRun;
  /** What the runs may spend together in a day or a month (the schedule's time zone). @default no budget */
  budget?: Omit<ScheduleBudget, 'timezone'>;
  defaultModel?: string;
  concurrency?: number;
  maxAttempts?: number;
  spendCapUsd?: number;
  /** Prices per image by model for models the catalog shows no price for (`--price`). */
  prices?: Record<string, number>;
  /** Create it paused. */
  paused?: boolean;
  /** The IANA time zone cron times are read in. @default 'UTC' */
  timezone?: string;
  /**
   * How late a run missed while the server was down is still taken.
   * @default one interval of the schedule, from 1 minute to 1 day
   */
  catchupWindowMs?: number;
  /** Each run starts up to this much later, at random. @default 0 */
  jitterMs?: number;
  /** Columns the user owns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
  /**
   * The id of the ledger store the runs are recorded in (the command's `IMAGEBATCH_LEDGER`): a worker on another
   * store sends nothing for them.
   * @default any store
   */
  ledgerId?: string;
  /** Where that store is, for a worker's message when its own is another. @default not recorded */
  ledgerLocation?: string;
  /**
   * The report of a local `source` whose prices a cap needs, read before connecting (see {@link capReport}).
   * @default read here when needed
   */
  report?: BatchReport;
}

/**
 * The report of the file a cap needs the prices of: a local file when there is a spend cap (a URL's rows are held by
 * each run's batch until their price is known). A command reads it before it connects: a missing file is said at once.
 */
export async function capReport(
  options: Pick<CreateScheduleSettings, 'source' | 'spendCapUsd' | 'budget' | 'defaultModel' | 'userColumns'>,
): Promise<BatchReport | undefined> {
  if (options.spendCapUsd === undefined && !hasBudget(options.budget)) return undefined;
  return checkScheduleSource(options);
}

/** Whether a budget names a period: one that names none is no budget (nothing to keep, no price to check). */
function hasBudget(budget: CreateScheduleSettings['budget']): budget is NonNullable<CreateScheduleSettings['budget']> {
  return budget?.perDayUsd !== undefined || budget?.perMonthUsd !== undefined;
}

/** `imagebatch schedule create`: a Temporal Schedule that starts a fresh batch from the source on each tick. */
export async function createSchedule(options: CreateScheduleOptions): Promise<{ scheduleId: string }> {
  if (!ID_PATTERN.test(options.scheduleId)) {
    throw new Error(`schedule id ${JSON.stringify(options.scheduleId)} ${ID_RULE}`);
  }
  const eachRun = options.eachRun ?? DEFAULT_EACH_RUN;
  const input: ScheduledBatchWorkflowInput = {
    scheduleId: options.scheduleId,
    source: options.source,
    outDir: options.outDir,
    skipSucceeded: eachRun === 'new',
    ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
    ...(options.concurrency ? { concurrency: options.concurrency } : {}),
    ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
    ...(options.spendCapUsd === undefined ? {} : { spendCapUsd: options.spendCapUsd }),
    ...(options.prices ? { prices: options.prices } : {}),
    ...(options.userColumns ? { userColumns: options.userColumns } : {}),
    ...(hasBudget(options.budget)
      ? { budget: { ...options.budget, timezone: options.timezone ?? DEFAULT_TIMEZONE } }
      : {}),
    // `all` asks for new images by intent (a pipeline runs again to get new ones): no earlier request serves it.
    ledger: {
      ...(options.ledgerId ? { storeId: options.ledgerId } : {}),
      ...(options.ledgerLocation ? { storeLocation: options.ledgerLocation } : {}),
      newImages: eachRun === 'all',
    },
  };
  // A cap is kept only with a price for every model: a local file is checked now.
  const report = options.report ?? (await capReport(options));
  if (report) await checkPricesForCap(options.client, options.taskQueue, report.models, options.prices ?? {});
  const when = options.cron !== undefined ? { cron: options.cron } : { every: options.every };
  const interval = intervalOf(when);
  await options.client.schedule.create({
    scheduleId: options.scheduleId,
    spec: {
      ...(options.cron !== undefined ? { cronExpressions: [options.cron] } : { intervals: [{ every: options.every }] }),
      timezone: options.timezone ?? DEFAULT_TIMEZONE,
      jitter: options.jitterMs ?? DEFAULT_JITTER_MS,
    },
    action: {
      type: 'startWorkflow',
      workflowType: scheduledBatchWorkflow,
      workflowId: `schedule/${options.scheduleId}`,
      taskQueue: options.taskQueue,
      args: [input],
    },
    policies: {
      overlap: overlapOf(options.overlap ?? 'skip'),
      catchupWindow: options.catchupWindowMs ?? defaultCatchupWindowMs('ms' in interval ? interval.ms : Infinity),
    },
    memo: whenMemo(
      options.cron !== undefined ? { cron: options.cron } : { everyMs: 'ms' in interval ? interval.ms : 0 },
    ),
    state: { paused: options.paused ?? false, note: `imagebatch schedule for ${options.source}` },
  });
  return { scheduleId: options.scheduleId };
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
  /** When it runs, in which time zone, its catch-up window and jitter. */
  timing: ScheduleTiming;
  /** What each run asks for, and what the runs may spend. */
  asks: ScheduleAsks;
}

export interface ScheduleAsks {
  eachRun: EachRun;
  spendCapUsd?: number;
  budget?: ScheduleBudget;
}

/** What each run asks for and may spend, from the run input the schedule keeps. */
function asksOf(d: ScheduleDescription): ScheduleAsks {
  const input = (d.action.args?.[0] ?? {}) as Partial<ScheduledBatchWorkflowInput>;
  return {
    eachRun: input.skipSucceeded ? 'new' : 'all',
    ...(input.spendCapUsd === undefined ? {} : { spendCapUsd: input.spendCapUsd }),
    ...(input.budget ? { budget: input.budget } : {}),
  };
}

/** `describe`'s lines of what each run asks for and may spend. */
export function asksLines(a: ScheduleAsks): string[] {
  const each =
    a.eachRun === 'new'
      ? 'only the requests no earlier run may have paid for (new and changed rows, by what they ask)'
      : 'every row, as new images';
  const budget = a.budget
    ? [
        ...(a.budget.perDayUsd === undefined ? [] : [`${a.budget.perDayUsd} USD a day`]),
        ...(a.budget.perMonthUsd === undefined ? [] : [`${a.budget.perMonthUsd} USD a month`]),
      ].join(', ') + ` for all runs (${a.budget.timezone ?? DEFAULT_TIMEZONE})`
    : 'none';
  const cap = a.spendCapUsd === undefined ? 'none' : `${a.spendCapUsd} USD`;
  return [`each run: ${each}`, `spend cap of a run: ${cap}; budget: ${budget}`];
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
    timing: timingOf(d),
    asks: asksOf(d),
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
