import path from 'node:path';
import { type Command, InvalidArgumentError } from 'commander';
import { connectClient, withClient } from './client';
import { CARRY_OPTION, COLUMN_OPTION, userColumnsInput } from './columns';
import { PRICES_OPTION, PRICE_OPTION, pricesInput } from './prices';
import {
  ScheduleAction,
  OVERLAP_POLICIES,
  controlSchedule,
  createSchedule,
  describeSchedule,
  listSchedules,
  type OverlapPolicyName,
} from './commands/schedule';

interface CreateCliOptions {
  file: string;
  cron?: string;
  every?: string;
  out: string;
  overlap: OverlapPolicyName;
  skipSucceeded?: boolean;
  model?: string;
  concurrency?: number;
  maxAttempts?: number;
  spendCap?: number;
  price?: Record<string, number>;
  prices?: string;
  paused?: boolean;
  json?: boolean;
  carry?: string[];
  column?: Record<string, string>;
}

const print = (json: boolean | undefined, data: unknown, text: string) =>
  process.stdout.write(json ? `${JSON.stringify(data)}\n` : text.endsWith('\n') || text === '' ? text : `${text}\n`);

/** `imagebatch schedule create|ls|describe|pause|unpause|trigger|delete`. */
export function registerScheduleCommands(program: Command): void {
  const schedule = program.command('schedule').description('Scheduled pipelines: a fresh batch from a file or URL');
  schedule
    .command('create <id>')
    .description('Create a schedule that starts a batch from --file on a --cron or --every interval')
    .requiredOption('--file <path-or-url>', 'batch file the workers can read, or an http(s) URL, read on every run')
    .option('--cron <expr>', 'cron expression, e.g. "0 * * * *"')
    .option('--every <interval>', 'interval, e.g. 1h or "30 minutes"')
    .option('--out <dir>', 'output folder (each run writes below it)', 'out')
    .option(
      '--overlap <policy>',
      `when a run is due while one runs: ${OVERLAP_POLICIES.join(', ')}`,
      parseOverlap,
      'skip',
    )
    .option('--skip-succeeded', "leave out rows (by id) any earlier run may have paid for, from the runs' ledgers")
    .option('--model <id>', 'model of rows that name none')
    .option('--concurrency <n>', 'rows in flight at most', Number)
    .option('--max-attempts <n>', 'attempts per row', Number)
    .option('--spend-cap <usd>', 'spend cap of each run (each row reserves its price before it starts)', Number)
    .option(...PRICE_OPTION)
    .option(...PRICES_OPTION)
    .option(...CARRY_OPTION)
    .option(...COLUMN_OPTION)
    .option('--paused', 'create it paused')
    .option('--json', 'print as JSON')
    .action(async (id: string, o: CreateCliOptions) => {
      const columns = userColumnsInput(o);
      const { client, config, close } = await connectClient(process.env);
      try {
        const source = /^https?:\/\//i.test(o.file) ? o.file : path.resolve(o.file);
        const res = await createSchedule({
          client,
          taskQueue: config.taskQueue,
          scheduleId: id,
          source,
          outDir: path.resolve(o.out),
          overlap: o.overlap,
          ...(o.cron ? { cron: o.cron } : {}),
          ...(o.every ? { every: o.every } : {}),
          ...(o.skipSucceeded ? { skipSucceeded: true } : {}),
          ...(o.model ? { defaultModel: o.model } : {}),
          ...(o.concurrency ? { concurrency: o.concurrency } : {}),
          ...(o.maxAttempts ? { maxAttempts: o.maxAttempts } : {}),
          ...(o.spendCap === undefined ? {} : { spendCapUsd: o.spendCap }),
          ...(await pricesInput(o)),
          ...columns,
          ...(o.paused ? { paused: true } : {}),
        });
        print(o.json, res, `schedule ${id} created`);
      } finally {
        await close();
      }
    });
  schedule
    .command('ls')
    .description('Schedules and whether they are paused')
    .option('--json', 'print as JSON')
    .action(async (o: { json?: boolean }) => {
      await withClient(async (client) => {
        const list = await listSchedules(client);
        print(o.json, list, list.map((s) => `${s.scheduleId}\t${s.paused ? 'paused' : 'active'}`).join('\n'));
      });
    });
  schedule
    .command('describe <id>')
    .description('Next runs and recent runs of a schedule')
    .option('--json', 'print as JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      await withClient(async (client) => {
        const d = await describeSchedule(client, id);
        print(
          o.json,
          d,
          [
            `${d.scheduleId}: ${d.paused ? 'paused' : 'active'}${d.note ? ` (${d.note})` : ''}`,
            `next: ${d.nextRuns.join(', ') || '-'}`,
            ...d.recentRuns.map((r) => `ran ${r.scheduledAt}: ${r.workflowId}`),
          ].join('\n'),
        );
      });
    });
  for (const action of Object.values(ScheduleAction)) {
    schedule
      .command(`${action} <id>`)
      .description(`${action[0]!.toUpperCase()}${action.slice(1)} a schedule`)
      .action(async (id: string) => {
        await withClient(async (client) => {
          await controlSchedule(client, id, action);
          print(false, null, `schedule ${id}: ${action} done`);
        });
      });
  }
}

function parseOverlap(value: string): OverlapPolicyName {
  if ((OVERLAP_POLICIES as readonly string[]).includes(value)) return value as OverlapPolicyName;
  throw new InvalidArgumentError(`must be one of ${OVERLAP_POLICIES.join(', ')}`);
}
