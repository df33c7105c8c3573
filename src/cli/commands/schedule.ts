import path from 'node:path';
import { z } from 'zod';
import { connectClient } from '../client';
import { columnOptions, columnSchema, userColumnsInput } from '../columns';
import { defineCommand, type CommandDefinition, type CommandGroup } from '../command';
import { batchId, dollars, duration, flag, positiveInt, repeated } from '../options';
import { BUDGET_FLAG, parseBudgetOption } from '../schedule/budget-option';
import { priceOptions, priceSchema, pricesInput } from '../prices';
import { withLedgerStore } from '../ledger-store';
import { checkDeclaredPrices } from '../price-floor';
import {
  ALLOW_FREQUENT_FLAG,
  DEFAULT_TIMEZONE,
  catchupWindow,
  checkGuards,
  jitter,
  timezone,
} from '../schedule/guards';
import { checkScheduleSource, isUrlSource } from '../schedule/source';
import { checkSourceAddress, checkSourcePath, sourceAddressPolicy } from '../../activities/schedule-source';
import { loadServiceConfig } from '../../config/service-config';
import { secretFilePaths } from '../../config/known-settings';
import { withScheduleClient, workerMissing } from '../schedule/keep-alive';
import { timingLines } from '../schedule/timing';
import {
  DEFAULT_EACH_RUN,
  EACH_RUN,
  OVERLAP_POLICIES,
  asksLines,
  ScheduleAction,
  controlSchedule,
  createSchedule,
  describeSchedule,
  listSchedules,
  type ScheduleSpec,
} from '../schedule/manage';
import { scheduleRuns, scheduleRunsLines } from '../schedule-runs';
import { terminalText } from '../terminal-text';

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
    // The policies are in docs/schedules.md, and in the error a wrong value gets: the help fits one screen.
    { flags: '--overlap <policy>', description: 'due during a run: docs/schedules.md', default: 'skip' },
    {
      flags: '--each-run <all|new>',
      description: 'every row, or only new/changed ones',
      default: DEFAULT_EACH_RUN,
    },
    // The name of earlier versions: the same as --each-run new.
    { flags: '--skip-succeeded', description: 'the same as --each-run new', hidden: true },
    { flags: '--model <id>', description: 'model of rows that name none' },
    { flags: '--concurrency <n>', description: 'rows in flight at most' },
    // A tuning knob with a sane default (docs/schedules.md); the help fits one screen.
    { flags: '--max-attempts <n>', description: 'attempts per row', hidden: true },
    { flags: '--spend-cap <usd>', description: 'spend cap of each run' },
    { flags: `${BUDGET_FLAG} <usd/period>`, description: 'all runs together: 20/day, 300/month', repeatable: true },
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
      eachRun: z.enum(EACH_RUN, {
        error: (issue) => `must be one of ${EACH_RUN.join(', ')} (got ${JSON.stringify(issue.input)})`,
      }),
      skipSucceeded: flag,
      model: z.string().optional(),
      concurrency: positiveInt.optional(),
      maxAttempts: positiveInt.optional(),
      spendCap: dollars.optional(),
      budget: repeated(parseBudgetOption),
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
    // A URL on an address image downloads may not reach is refused now; each run checks it again on the worker.
    if (isUrlSource(source)) await checkSourceAddress(source, sourceAddressPolicy(loadServiceConfig(env)));
    // A local file is checked now, before anything connects: nothing is created for a file that would fail each run.
    const checked = await checkScheduleSource({ source, ...(o.model ? { defaultModel: o.model } : {}), ...columns });
    const budget = o.budget;
    const report = o.spendCap === undefined && budget === undefined ? undefined : checked;
    const { ledgerId, ledgerLocation } = await withLedgerStore(env, async (ledger) => {
      await checkDeclaredPrices(ledger, prices.prices);
      return { ledgerId: ledger.id, ledgerLocation: ledger.location };
    });
    // The worker reads a local file only where its settings allow (src/activities/schedule-source.ts): checked here
    // with this shell's, which local mode's worker shares, so a schedule is never made to fail at every run.
    if (!isUrlSource(source)) {
      const folders = { scheduleDir: path.resolve(o.out), allowed: loadServiceConfig(env).scheduleSources };
      await checkSourcePath(source, { ...folders, secretFiles: secretFilePaths(env) });
    }
    const log = (line: string) => stderr(`${line}\n`);
    const connected = await connectClient(env, { local: 'worker', log });
    const { client, config, close } = connected;
    try {
      const res = await createSchedule({
        client,
        taskQueue: config.taskQueue,
        ledgerId,
        ledgerLocation,
        scheduleId: o.id,
        source,
        outDir: path.resolve(o.out),
        overlap: o.overlap,
        ...spec,
        eachRun: o.skipSucceeded ? 'new' : o.eachRun,
        ...(budget ? { budget } : {}),
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
            ...asksLines(d.asks),
            `next: ${d.nextRuns.join(', ') || '-'}`,
            ...d.recentRuns.map((r) => `ran ${r.scheduledAt}: ${r.workflowId}`),
            ...scheduleRunsLines(runs),
          ]
            .map(terminalText)
            .join('\n'),
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
