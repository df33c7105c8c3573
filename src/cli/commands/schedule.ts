import path from 'node:path';
import { type Client, type ScheduleDescription, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { z } from 'zod';
import { scheduledBatchWorkflow, type ScheduledBatchWorkflowInput } from '../../workflows';
import { ID_PATTERN, type UserColumns } from '../../model';
import type { BatchReport } from '../../batch';
import { connectClient } from '../client';
import { columnOptions, columnSchema, userColumnsInput } from '../columns';
import { defineCommand, type CommandDefinition, type CommandGroup } from '../command';
import { ID_RULE, batchId, dollars, duration, flag, positiveInt } from '../options';
import { checkPricesForCap, priceOptions, priceSchema, pricesInput } from '../prices';
import { withLedgerStore } from '../ledger-store';
import {
  ALLOW_FREQUENT_FLAG,
  DEFAULT_JITTER_MS,
  DEFAULT_TIMEZONE,
  catchupWindow,
  checkGuards,
  defaultCatchupWindowMs,
  intervalOf,
  jitter,
  timezone,
} from '../schedule/guards';
import { checkScheduleSource, isUrlSource } from '../schedule/source';
import { withScheduleClient, workerMissing } from '../schedule/keep-alive';
import { timingLines, timingOf, whenMemo, type ScheduleTiming } from '../schedule/timing';
import { scheduleRuns, scheduleRunsLines } from '../schedule-runs';

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
  skipSucceeded?: boolean;
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
  options: Pick<CreateScheduleSettings, 'source' | 'spendCapUsd' | 'defaultModel' | 'userColumns'>,
): Promise<BatchReport | undefined> {
  if (options.spendCapUsd === undefined) return undefined;
  return checkScheduleSource(options);
}

/** `imagebatch schedule create`: a Temporal Schedule that starts a fresh batch from the source on each tick. */
export async function createSchedule(options: CreateScheduleOptions): Promise<{ scheduleId: string }> {
  if (!ID_PATTERN.test(options.scheduleId)) {
    throw new Error(`schedule id ${JSON.stringify(options.scheduleId)} ${ID_RULE}`);
  }
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
    // Each run asks for new images by intent (a pipeline runs again to get new ones): no earlier request serves it.
    ledger: { ...(options.ledgerId ? { storeId: options.ledgerId } : {}), newImages: true },
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

const print = (json: boolean | undefined, data: unknown, text: string) =>
  json ? `${JSON.stringify(data)}\n` : text.endsWith('\n') || text === '' ? text : `${text}\n`;

/** Exactly one of the two. */
const exactlyOne = { message: 'give exactly one of --cron and --every', path: ['cron'] };

/** `imagebatch schedule create ID`: checks a local file's prices for a cap before it creates the schedule. */
const createCommand = defineCommand({
  name: 'create',
  description: 'Create a schedule: a batch from --file on a --cron or --every interval',
  args: [{ name: 'id', description: 'the schedule id' }],
  options: [
    {
      flags: '--file <path-or-url>',
      description: 'file (checked now), or http(s) URL read by each run',
      required: true,
    },
    { flags: '--cron <expr>', description: 'cron expression, e.g. "0 * * * *"' },
    { flags: '--every <interval>', description: 'interval of at least 1 min, e.g. 1h or "30 minutes"' },
    { flags: '--timezone <iana>', description: 'IANA time zone of --cron', default: DEFAULT_TIMEZONE },
    { flags: '--catchup-window <dur>', description: 'how late a missed run starts (default: 1 interval)' },
    { flags: '--jitter <dur>', description: 'random start delay, up to this', default: '0s' },
    // The refusal of a shorter interval names it; the help fits one screen.
    { flags: ALLOW_FREQUENT_FLAG, description: 'allow runs less than 1 min apart', hidden: true },
    { flags: '--out <dir>', description: 'output folder of the runs', default: 'out' },
    // The policies are in docs/design.md, and in the error a wrong value gets: the help fits one screen.
    { flags: '--overlap <policy>', description: 'due during a run: docs/design.md', default: 'skip' },
    {
      flags: '--skip-succeeded',
      description: 'leave out rows an earlier run may have paid for',
    },
    { flags: '--model <id>', description: 'model of rows that name none' },
    { flags: '--concurrency <n>', description: 'rows in flight at most' },
    { flags: '--max-attempts <n>', description: 'attempts per row' },
    { flags: '--spend-cap <usd>', description: 'spend cap of each run' },
    ...priceOptions(),
    ...columnOptions(false),
    { flags: '--paused', description: 'create it paused' },
    { flags: '--json', description: 'print as JSON' },
  ],
  schema: z
    .object({
      id: batchId,
      file: z.string(),
      cron: z.string().optional(),
      every: duration({ examples: '1h or "30 minutes"' }).optional(),
      timezone,
      catchupWindow: catchupWindow.optional(),
      jitter,
      allowFrequent: flag,
      out: z.string(),
      overlap: z.enum(OVERLAP_POLICIES, {
        error: (issue) => `must be one of ${OVERLAP_POLICIES.join(', ')} (got ${JSON.stringify(issue.input)})`,
      }),
      skipSucceeded: flag,
      model: z.string().optional(),
      concurrency: positiveInt.optional(),
      maxAttempts: positiveInt.optional(),
      spendCap: dollars.optional(),
      ...priceSchema,
      ...columnSchema,
      paused: flag,
      json: flag,
    })
    .refine((o) => (o.cron === undefined) !== (o.every === undefined), exactlyOne)
    .superRefine(checkGuards),
  async run(o, { stdout, stderr, env }) {
    const columns = userColumnsInput(o);
    const prices = await pricesInput(o);
    const spec: ScheduleSpec = o.cron !== undefined ? { cron: o.cron } : { every: o.every! };
    const source = isUrlSource(o.file) ? o.file : path.resolve(o.file);
    // A local file is checked now, before anything connects: nothing is created for a file that would fail each run.
    const checked = await checkScheduleSource({ source, ...(o.model ? { defaultModel: o.model } : {}), ...columns });
    const report = o.spendCap === undefined ? undefined : checked;
    const ledgerId = await withLedgerStore(env, async (ledger) => ledger.id);
    const log = (line: string) => stderr(`${line}\n`);
    const connected = await connectClient(env, { local: 'worker', log });
    const { client, config, close } = connected;
    try {
      const res = await createSchedule({
        client,
        taskQueue: config.taskQueue,
        ledgerId,
        scheduleId: o.id,
        source,
        outDir: path.resolve(o.out),
        overlap: o.overlap,
        ...spec,
        ...(o.skipSucceeded ? { skipSucceeded: true } : {}),
        ...(o.model ? { defaultModel: o.model } : {}),
        ...(o.concurrency ? { concurrency: o.concurrency } : {}),
        ...(o.maxAttempts ? { maxAttempts: o.maxAttempts } : {}),
        ...(o.spendCap === undefined ? {} : { spendCapUsd: o.spendCap }),
        ...prices,
        ...columns,
        ...(o.paused ? { paused: true } : {}),
        ...(report ? { report } : {}),
        timezone: o.timezone,
        jitterMs: o.jitter,
        ...(o.catchupWindow === undefined ? {} : { catchupWindowMs: o.catchupWindow }),
      });
      stdout(print(o.json, res, `schedule ${o.id} created`));
      const missing = o.paused ? undefined : await workerMissing(connected, env, log);
      if (missing) log(`imagebatch: ${missing}`);
    } finally {
      await close();
    }
  },
});

const lsCommand = defineCommand({
  name: 'ls',
  description: 'Schedules and whether they are paused',
  options: [{ flags: '--json', description: 'print as JSON' }],
  schema: z.object({ json: flag }),
  async run(o, { stdout, stderr, env }) {
    await withScheduleClient(env, stderr, async (client) => {
      const list = await listSchedules(client);
      stdout(print(o.json, list, list.map((s) => `${s.scheduleId}\t${s.paused ? 'paused' : 'active'}`).join('\n')));
      return list.some((s) => !s.paused);
    });
  },
});

const describeCommand = defineCommand({
  name: 'describe',
  description: 'Next runs, recent runs and how each ended, and the ticks skipped',
  args: [{ name: 'id', description: 'the schedule id' }],
  options: [{ flags: '--json', description: 'print as JSON' }],
  schema: z.object({ id: batchId, json: flag }),
  async run(o, { stdout, stderr, env }) {
    await withScheduleClient(env, stderr, async (client) => {
      const d = await describeSchedule(client, o.id);
      const runs = await scheduleRuns(client, o.id);
      stdout(
        print(
          o.json,
          { ...d, runs },
          [
            `${d.scheduleId}: ${d.paused ? 'paused' : 'active'}${d.note ? ` (${d.note})` : ''}`,
            ...timingLines(d.timing),
            `next: ${d.nextRuns.join(', ') || '-'}`,
            ...d.recentRuns.map((r) => `ran ${r.scheduledAt}: ${r.workflowId}`),
            ...scheduleRunsLines(runs),
          ].join('\n'),
        ),
      );
      return !d.paused;
    });
  },
});

const actionCommands = Object.values(ScheduleAction).map((action) =>
  defineCommand({
    name: action,
    description: `${action[0]!.toUpperCase()}${action.slice(1)} a schedule`,
    args: [{ name: 'id', description: 'the schedule id' }],
    schema: z.object({ id: batchId }),
    async run(o, { stdout, stderr, env }) {
      await withScheduleClient(env, stderr, async (client) => {
        await controlSchedule(client, o.id, action);
        stdout(`schedule ${o.id}: ${action} done\n`);
        return action === ScheduleAction.Trigger || action === ScheduleAction.Unpause;
      });
    },
  }),
);

/** `imagebatch schedule create|ls|describe|pause|unpause|trigger|delete`. */
export const scheduleCommands: CommandGroup = {
  name: 'schedule',
  description: 'Scheduled pipelines: a fresh batch from a file or URL',
  summary: 'Scheduled batches from a file or URL',
  commands: [createCommand, lsCommand, describeCommand, ...actionCommands] as readonly CommandDefinition[],
};
