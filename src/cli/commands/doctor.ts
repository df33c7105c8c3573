import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  CheckResult,
  doctorPassed,
  runDoctorChecks,
  settingLine,
  settingsProblemReport,
  type DoctorOptions,
  type DoctorReport,
} from '../../doctor';
import { doctorImageSaver } from '../../activities/doctor';
import { doctorStatusJudge } from '../../activities/status-check';
import { loadApiKey } from '../../config/api-key';
import { ConfigError, loadServiceConfig } from '../../config/service-config';
import { doctorWorkflow } from '../../workflows';
import { connectClient } from '../client';
import { terminalText } from '../terminal-text';
import { z } from 'zod';
import { defineCommand } from '../command';
import { ExitCode } from '../errors';
import { duration, flag } from '../options';

/**
 * Exit codes of `imagebatch doctor`: 0 every check passed (warnings and guesses allowed); 1 a check failed (something
 * that would break a batch) or the checks could not run (no worker); 2 wrong options; 3 `--spend-one --model` names
 * a model the account's catalog lacks (nothing was submitted).
 */
export const DoctorExit = ExitCode;

/** The longest `--max-wait`: the worker's activity has 20 minutes in all. */
export const DOCTOR_MAX_WAIT_MS = 15 * 60_000;
const DEFAULT_MAX_WAIT_MS = 5 * 60_000;
const TEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** Looks at the task queue's pollers this many times, a second apart, before saying that no worker runs. */
const POLLER_CHECKS = 5;

export interface DoctorCommandOptions {
  /**
   * Run the checks in this process, with its own environment (`IMAGEGEN_*` and the key must be set here).
   * @default false: through a running worker, with the worker's settings and key
   */
  local?: boolean;
  /** Submit one paid creation of this model (`--spend-one --model`). */
  spendOne?: boolean;
  model?: string;
  /**
   * Names the paid test: its idempotency key is `imagebatch-doctor/<testId>/<model>`.
   * @default 'spend-one'
   */
  testId?: string;
  /**
   * Folder for the paid test's record and images (on the worker, relative to its output root).
   * @default 'doctor-out'
   */
  out?: string;
  /** Longest wait for the paid creation, at most {@link DOCTOR_MAX_WAIT_MS} (the CLI checks it). @default 5 minutes */
  maxWaitMs?: number;
  json?: boolean;
  /** Environment of the settings (local mode) and of the Temporal connection. */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * A Temporal client and task queue to use instead of connecting from `env` (tests).
   * @default connectClient(env)
   */
  temporal?: { client: Client; taskQueue: string; namespace: string };
  /** Folder relative paths are resolved against in local mode. @default process.cwd() */
  outputRoot?: string;
  /** @default process.stdout */
  write?: (text: string) => void;
  /** One line for a person. @default process.stderr */
  warn?: (line: string) => void;
  signal?: AbortSignal;
}

export interface DoctorOutcome {
  exitCode: number;
  report?: DoctorReport;
  /** The workflow that ran the checks on a worker. */
  workflowId?: string;
}

/** `imagebatch doctor`: checks the service without spending (or with one paid test), prints a table, returns the exit code. */
export async function doctor(options: DoctorCommandOptions): Promise<DoctorOutcome> {
  const write = options.write ?? ((text: string) => void process.stdout.write(text));
  const warn = options.warn ?? ((line: string) => void process.stderr.write(`${line}\n`));

  const usage = usageProblem(options);
  if (usage) {
    warn(`imagebatch doctor: ${usage}`);
    return { exitCode: DoctorExit.Usage };
  }
  const checkOptions: DoctorOptions = options.spendOne
    ? {
        spendOne: {
          model: options.model ?? '',
          testId: options.testId ?? 'spend-one',
          outDir: options.out ?? 'doctor-out',
          maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
        },
      }
    : {};

  if (checkOptions.spendOne) {
    warn(
      `imagebatch doctor: --spend-one pays for one creation of ${terminalText(checkOptions.spendOne.model)}; once it ` +
        'is accepted, its key is sent a second time to prove the service honours it (at most one extra charge)',
    );
  }
  let report: DoctorReport;
  let workflowId: string | undefined;
  if (options.local) {
    report = await runLocal(options, checkOptions);
  } else {
    const viaWorker = await runOnWorker(options, checkOptions);
    if ('problem' in viaWorker) {
      warn(`imagebatch doctor: ${terminalText(viaWorker.problem)}`);
      return { exitCode: DoctorExit.Failure };
    }
    report = viaWorker.report;
    workflowId = viaWorker.workflowId;
  }
  const exitCode = doctorExitCode(report);
  write(options.json ? `${JSON.stringify({ ...report, exitCode }, null, 2)}\n` : doctorTable(report, exitCode));
  return { exitCode, report, ...(workflowId ? { workflowId } : {}) };
}

/** 0 when nothing failed; 3 when only the model of `--spend-one` is wrong; 1 otherwise. */
export function doctorExitCode(report: DoctorReport): number {
  if (doctorPassed(report)) return DoctorExit.Ok;
  const failed = report.checks.filter((c) => c.result === CheckResult.Fail);
  return failed.every((c) => c.invalidInput) ? DoctorExit.InvalidInput : DoctorExit.Failure;
}

function usageProblem(options: DoctorCommandOptions): string | undefined {
  if (!options.spendOne) {
    if (options.model !== undefined || options.testId !== undefined || options.out !== undefined) {
      return '--model, --test-id and --out belong to --spend-one';
    }
    return undefined;
  }
  if (!options.model) return '--spend-one needs --model <id> (one of the models doctor lists)';
  if (options.testId !== undefined && !TEST_ID.test(options.testId)) {
    return '--test-id must be 1 to 64 letters, digits, ".", "_" or "-"';
  }
  return undefined;
}

/** The checks in this process, with its environment. */
async function runLocal(options: DoctorCommandOptions, checkOptions: DoctorOptions): Promise<DoctorReport> {
  let config;
  try {
    config = loadServiceConfig(options.env);
  } catch (err) {
    if (err instanceof ConfigError) return settingsProblemReport(err.message);
    throw err;
  }
  const outputRoot = options.outputRoot ?? process.cwd();
  return runDoctorChecks(
    {
      config,
      apiKey: () => loadApiKey(options.env),
      outputRoot,
      saveImages: doctorImageSaver({ config, outputRoot, now: Date.now }),
      judgeStatus: doctorStatusJudge({ config, now: Date.now }),
      ...(options.signal ? { signal: options.signal } : {}),
    },
    checkOptions,
  );
}

/** The checks on a running worker (its settings, its key), through `doctorWorkflow`. */
async function runOnWorker(
  options: DoctorCommandOptions,
  checkOptions: DoctorOptions,
): Promise<{ report: DoctorReport; workflowId: string } | { problem: string }> {
  const connected = options.temporal
    ? { ...options.temporal, close: async () => undefined }
    : await connectClient(options.env, { local: 'worker' }).then(({ client, config, close }) => ({
        client,
        taskQueue: config.taskQueue,
        namespace: config.namespace,
        close,
      }));
  const { client, taskQueue, namespace } = connected;
  try {
    if (!(await workerPolls(client, namespace, taskQueue))) {
      return {
        problem:
          `no worker polls task queue ${taskQueue} (namespace ${namespace}): start one with \`imagebatch worker\` ` +
          '(doctor checks its settings and key), or run `imagebatch doctor --local` with IMAGEGEN_* set here',
      };
    }
    const waitMs = checkOptions.spendOne ? checkOptions.spendOne.maxWaitMs + 5 * 60_000 : 3 * 60_000;
    const workflowId = `doctor/${Date.now()}`;
    const run = () =>
      client.workflow.execute(doctorWorkflow, {
        taskQueue,
        workflowId,
        args: [checkOptions],
        workflowExecutionTimeout: waitMs,
      });
    const report = await (options.signal ? client.withAbortSignal(options.signal, run) : run());
    return { report, workflowId };
  } catch (err) {
    if (options.signal?.aborted) throw err;
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    return { problem: `the checks did not finish on the worker: ${why}` };
  } finally {
    await connected.close();
  }
}

/** Whether a worker polls the task queue's activities; a worker that has just started gets a few seconds to show. */
async function workerPolls(client: Client, namespace: string, taskQueue: string): Promise<boolean> {
  for (let attempt = 1; ; attempt += 1) {
    const { pollers } = await client.workflowService.describeTaskQueue({
      namespace,
      taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    });
    if ((pollers ?? []).length > 0) return true;
    if (attempt >= POLLER_CHECKS) return false;
    await sleep(1000);
  }
}

/** The report as a table: check, result, what was found; what to do under it; a summary line. */
export function doctorTable(report: DoctorReport, exitCode: number): string {
  const rows = report.checks.map((c) => ({
    name: terminalText(c.name),
    result: c.result,
    found: terminalText(c.found),
    hint: c.hint === undefined ? undefined : terminalText(c.hint),
  }));
  const nameWidth = Math.max('CHECK'.length, ...rows.map((r) => r.name.length));
  const resultWidth = Math.max('RESULT'.length, ...rows.map((r) => r.result.length));
  const indent = ' '.repeat(nameWidth + resultWidth + 4);
  const lines = [
    `imagebatch doctor: checks run by ${terminalText(report.ranOn)}, with its settings and key`,
    '',
    `${'CHECK'.padEnd(nameWidth)}  ${'RESULT'.padEnd(resultWidth)}  FOUND`,
  ];
  for (const r of rows) {
    lines.push(`${r.name.padEnd(nameWidth)}  ${r.result.padEnd(resultWidth)}  ${r.found}`);
    if (r.hint !== undefined) lines.push(`${indent}-> ${r.hint}`);
  }
  if (report.settings !== undefined && report.settings.length > 0) {
    lines.push('', 'settings to write (an env file takes these lines as they are; in a shell, run `set -a` first):');
    for (const setting of report.settings) lines.push(terminalText(settingLine(setting)));
  }
  const failed = report.checks.filter((c) => c.result === CheckResult.Fail).length;
  const guessed = report.checks.filter((c) => c.result === CheckResult.Guess || c.result === CheckResult.Warn).length;
  lines.push('');
  if (report.spendOne) {
    lines.push(
      `paid test: idempotency key ${terminalText(report.spendOne.idempotencyKey)}; the same --test-id and model reuse it, so a re-run pays nothing again`,
    );
  }
  lines.push(
    failed === 0
      ? `doctor: no problem found${guessed > 0 ? ` (${guessed} guess(es) or warning(s) above)` : ''}`
      : exitCode === DoctorExit.InvalidInput
        ? 'doctor: the model given is not available; nothing was submitted (exit 3)'
        : `doctor: ${failed} check(s) FAILED: a batch would not work (exit 1)`,
  );
  return `${lines.join('\n')}\n`;
}

/** `imagebatch doctor`: its exit code is {@link doctorExitCode}'s. */
export const doctorCommand = defineCommand({
  name: 'doctor',
  description:
    "Check the image service with a worker's settings and key, without spending (--spend-one: one paid test)",
  summary: 'Check the image service without spending',
  options: [
    {
      flags: '--local',
      description: "run the checks in this process, with its own IMAGEGEN_* settings and key (not a worker's)",
    },
    {
      flags: '--spend-one',
      description:
        'submit ONE paid creation, prove its key is honoured (sent twice: at most one extra charge), show its ' +
        'record and mapping, save its image(s)',
    },
    { flags: '--model <id>', description: '--spend-one: the model to test' },
    {
      flags: '--test-id <name>',
      description: '--spend-one: names the test; its key is imagebatch-doctor/<name>/<model>',
    },
    { flags: '--out <dir>', description: '--spend-one: folder of the record and the images (default doctor-out)' },
    {
      flags: '--max-wait <duration>',
      description: '--spend-one: longest wait for the creation (default 5m, at most 15m)',
    },
    { flags: '--json', description: 'print the report as JSON' },
  ],
  schema: z.object({
    local: flag,
    spendOne: flag,
    model: z.string().optional(),
    testId: z.string().optional(),
    out: z.string().optional(),
    maxWait: duration({ maxMs: DOCTOR_MAX_WAIT_MS, examples: '90s or 5m' }).optional(),
    json: flag,
  }),
  async run({ maxWait, ...opts }, { stdout, stderr, env, signal }) {
    const { exitCode } = await doctor({
      ...opts,
      maxWaitMs: maxWait,
      env,
      signal,
      write: stdout,
      warn: (line) => stderr(`${line}\n`),
    });
    return exitCode;
  },
});
