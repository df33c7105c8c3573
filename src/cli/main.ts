import { setMaxListeners } from 'node:events';
import path from 'node:path';
import { appendFileSync, mkdirSync } from 'node:fs';
import { inspect } from 'node:util';
import { DefaultLogger, Runtime, type LogEntry } from '@temporalio/worker';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import type { Client } from '@temporalio/client';
import {
  BatchFileChangedError,
  BatchValidationError,
  followBatch,
  parseDurationMs,
  startOrAttachBatch,
} from './batches';
import { connectClient, withClient } from './client';
import { BatchAction, batchStatus, controlBatch, listBatches } from './commands/batch-control';
import { reconcile, reconcileLines } from './commands/reconcile';
import { results } from './commands/results';
import { estimateLine, modelLines, validate } from './commands/validate';
import {
  PRICES_OPTION,
  PRICE_OPTION,
  PriceOptionError,
  PriceUnknownError,
  pricesInput,
  userPrices,
  type PriceCliOptions,
} from './prices';
import { CARRY_OPTION, COLUMN_OPTION, ColumnOptionError, userColumnsInput, type ColumnCliOptions } from './columns';
import { progressLine, spendText } from './progress-line';
import { terminalText } from './terminal-text';
import { registerScheduleCommands } from './schedule-program';
import { secretArgumentProblem } from './secret-args';
import {
  CODEC_TOKEN_ENV,
  CODEC_TOKEN_MIN_LENGTH,
  codecTokenFromEnv,
  parseAllowedOrigin,
  payloadCodecFromEnv,
  startCodecServer,
} from '../codec';
import { PAYLOAD_KEY_ENV, PAYLOAD_KEY_FILE_ENV } from '../config/codec-config';
import { demo, resultFilesSummary } from './commands/demo';
import { simulator } from './commands/simulator';
import { runWorker } from './commands/worker';
import { workerHealth } from './commands/healthcheck';
import { doctor } from './commands/doctor';

/** Exit codes of the `imagebatch` command. */
export const ExitCode = {
  Ok: 0,
  Failure: 1,
  Usage: 2,
  /** The input file has problems; nothing was started or charged. */
  InvalidInput: 3,
  Interrupted: 130,
} as const;

function stderr(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * Where the SDK's own log lines go: the terminal by default; the demo, which runs a worker in this process, sends
 * them (an activity's retry with its stack, say) to a log file, and keeps the terminal for people.
 */
const sdkLog = {
  file: undefined as string | undefined,
  write(entry: LogEntry): void {
    const line =
      `${new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString()} [${entry.level}] ${entry.message}` +
      `${entry.meta && Object.keys(entry.meta).length ? ` ${inspect(entry.meta, { depth: 4, breakLength: Infinity })}` : ''}\n`;
    if (this.file) appendFileSync(this.file, line);
    else process.stderr.write(line);
  },
};

function buildProgram(signal: AbortSignal): { program: Command; result: { code: number } } {
  const result = { code: ExitCode.Ok as number };
  const program = new Command('imagebatch')
    .description('Bulk image generation from CSV prompts as durable Temporal workflows')
    .exitOverride()
    .showHelpAfterError()
    // Commander echoes an unknown `--option=value` whole; the value may be a pasted API key, so it is never shown.
    .configureOutput({
      outputError: (str, write) => write(str.replace(/(unknown option '[^'=\s]*=)[^']*'/g, "$1...'")),
    });

  program
    .command('demo')
    .description('Run the bundled batch on the embedded Temporal dev server and the simulator (nothing to configure)')
    .option('--home <dir>', 'folder for the demo state and results', '.imagebatch')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { home: string; json?: boolean }) => {
      const tty = process.stderr.isTTY && !opts.json;
      mkdirSync(path.resolve(opts.home), { recursive: true });
      sdkLog.file = path.join(path.resolve(opts.home), 'demo.log');
      let lastPlain = 0;
      const res = await demo({
        home: path.resolve(opts.home),
        log: stderr,
        signal,
        onProgress: (line, p) => {
          if (tty) process.stderr.write(`\r\x1b[2K${line}`);
          else if (p.done || Date.now() - lastPlain > 2000) {
            lastPlain = Date.now();
            stderr(line);
          }
        },
      });
      if (tty) process.stderr.write('\n');
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
        return;
      }
      const c = res.progress.counts;
      process.stdout.write(
        [
          `Batch "${res.batchId}" ${res.progress.status}: ${c.succeeded} succeeded, ${c.images_unsaved} images unsaved, ` +
            `${c.failed} failed, ${c.unknown} unknown, ${c.cancelled} cancelled, ${c.not_run} not run; ` +
            `${spendText(res.progress)} (refunded $${res.progress.refundedUsd.toFixed(2)}).`,
          `Gallery:  ${res.galleryUrl}`,
          `Results:  ${res.results.resultsCsv}`,
          `          ${res.results.resultsJsonl}`,
          ...resultFilesSummary(res.batchId, res.results),
          ...(res.webUi ? [`Temporal Web UI (while a demo runs): ${res.webUi}`] : []),
          `Log:      ${sdkLog.file} (the worker's retries and warnings)`,
          '',
        ].join('\n'),
      );
    });

  program
    .command('simulator')
    .description('Run the image-service simulator (a dry-run target; keys from its config, never from arguments)')
    .option('--port <n>', 'API port on 127.0.0.1 (0: any free port)', parsePort)
    .option('--files-port <n>', 'image file port on 127.0.0.1 (0: any free port)', parsePort)
    .option('--config <file>', 'JSON configuration file')
    .option('--json', 'print the addresses as JSON')
    .action(async (opts: { port?: number; filesPort?: number; config?: string; json?: boolean }) => {
      const started = await simulator({
        ...(opts.port === undefined ? {} : { port: opts.port }),
        ...(opts.filesPort === undefined ? {} : { filesPort: opts.filesPort }),
        ...(opts.config === undefined ? {} : { configFile: opts.config }),
      });
      const { baseUrl, filesUrl, ledgerUrl } = started;
      process.stdout.write(
        opts.json
          ? `${JSON.stringify({ baseUrl, filesUrl, ledgerUrl })}\n`
          : `simulator API: ${baseUrl}\nimage files:   ${filesUrl}\nledger:        ${ledgerUrl}\n(Ctrl-C stops it)\n`,
      );
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await started.simulator.close();
    });
  program
    .command('codec-server')
    .description(
      `Serve /encode and /decode for the Temporal Web UI with the payload keys of ${PAYLOAD_KEY_ENV} (on 127.0.0.1)`,
    )
    .option('--port <n>', 'port on 127.0.0.1 (0: any free port)', parsePort, 8888)
    .option(
      '--allow-origin <url...>',
      'Web UI origins allowed by CORS, http(s)://host[:port] (default: the dev server UI on port 8233)',
      parseOrigins,
    )
    .addHelpText(
      'after',
      `\nRequests must name the server's own Host (localhost, 127.0.0.1 or [::1] with its port) and\n` +
        `carry its token: give the Web UI the endpoint printed at start (http://127.0.0.1:<port>/<token>),\n` +
        `or send Authorization: Bearer <token>. The token is new at each start, or the value of\n` +
        `${CODEC_TOKEN_ENV} (at least ${CODEC_TOKEN_MIN_LENGTH} characters).`,
    )
    .action(async (opts: { port: number; allowOrigin?: string[] }) => {
      const codec = payloadCodecFromEnv(process.env);
      if (!codec) throw new Error(`set ${PAYLOAD_KEY_ENV} or ${PAYLOAD_KEY_FILE_ENV}: the codec server needs the key`);
      const { token, generated } = codecTokenFromEnv(process.env);
      const started = await startCodecServer({
        codec,
        port: opts.port,
        token,
        ...(opts.allowOrigin ? { allowOrigins: opts.allowOrigin } : {}),
      });
      process.stdout.write(`codec server: ${started.url} (key id ${codec.keyId}; Ctrl-C stops it)\n`);
      // The token once, on stderr (not in a log of stdout), as the one line a person copies into the Web UI.
      stderr(
        generated
          ? `codec endpoint for the Web UI's codec server setting (holds a new token; shown once): ${started.endpoint}`
          : `codec endpoint for the Web UI's codec server setting: ${started.url}/<the token in ${CODEC_TOKEN_ENV}>`,
      );
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await started.close();
    });
  program
    .command('worker')
    .description(
      'Run a worker for a Temporal cluster. Settings come from the environment only: TEMPORAL_ADDRESS, ' +
        'TEMPORAL_NAMESPACE, TEMPORAL_API_KEY / TEMPORAL_TLS_*, IMAGEBATCH_RATE_LIMIT, IMAGEGEN_BASE_URL, ' +
        'IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE, IMAGEBATCH_PAYLOAD_KEY or _FILE, IMAGEBATCH_METRICS_ADDRESS ' +
        '(see the README)',
    )
    .option('--output-root <dir>', 'folder that relative batch output folders are resolved against')
    .action(async (opts: { outputRoot?: string }) => {
      await runWorker({
        env: process.env,
        signal,
        log: stderr,
        ...(opts.outputRoot ? { outputRoot: path.resolve(opts.outputRoot) } : {}),
      });
      stderr('worker stopped');
    });
  program
    .command('healthcheck')
    .description("Exit 0 when this host's worker polls its task queue (the container health check)")
    .action(async () => {
      const { client, config, close } = await connectClient(process.env);
      try {
        const health = await workerHealth({ client, namespace: config.namespace, taskQueue: config.taskQueue });
        stderr(health.detail);
        if (!health.healthy) result.code = ExitCode.Failure;
      } finally {
        await close();
      }
    });
  program
    .command('validate <file>')
    .description('Check a batch file: every problem with its line number; nothing is started or charged')
    .option('--model <id>', 'model of rows that name none')
    .option(
      '--catalog',
      "also check models against the account's catalog and estimate the cost (asks a running worker)",
    )
    .option(...PRICE_OPTION)
    .option(...PRICES_OPTION)
    .option(...CARRY_OPTION)
    .option(...COLUMN_OPTION)
    .option('--json', 'print the report as JSON')
    .action(async (file: string, opts: ValidateCliOptions) => {
      const prices = await userPrices(opts);
      const columns = userColumnsInput(opts);
      const run = async (catalog?: { client: Client; taskQueue: string }) =>
        validate({
          file,
          prices,
          ...columns,
          ...(opts.model ? { defaultModel: opts.model } : {}),
          ...(catalog ? { catalog } : {}),
        });
      const res = opts.catalog
        ? await (async () => {
            const { client, config, close } = await connectClient(process.env);
            try {
              return await run({ client, taskQueue: config.taskQueue });
            } finally {
              await close();
            }
          })()
        : await run();
      const { report } = res;
      if (opts.json) process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
      else {
        for (const p of report.problems) stderr(`${file}:${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}`);
        if (report.problemsDropped > 0) stderr(`${file}: ... and ${report.problemsDropped} more problems`);
        if (res.catalogProblem) stderr(`imagebatch: the catalog could not be read: ${res.catalogProblem}`);
        const models = res.models
          ? modelLines(res).map(terminalText)
          : Object.entries(report.models).map(([m, u]) => `${m}: ${u.rows} rows, ${u.images} images`);
        const line = estimateLine(res);
        const estimate = line === undefined ? '' : `\n${line}`;
        process.stdout.write(
          `${report.rows} rows, ${report.validRows} valid, ${report.problemCount} problem(s)` +
            `${models.length ? `\n${models.join('\n')}` : ''}${estimate}\n`,
        );
      }
      if (!res.ok) result.code = ExitCode.InvalidInput;
    });

  program
    .command('run <file>')
    .description('Start a batch (or attach to the running one with the same id); a worker must be running')
    .option('--batch-id <id>', 'batch id (default: the file name); the same id again resumes, never repays')
    .option('--model <id>', 'model of rows that name none')
    .option('--out <dir>', 'output folder for images and results', 'out')
    .option('--concurrency <n>', 'rows in flight at most', parsePositiveInt, 8)
    .option('--max-attempts <n>', 'attempts per row (only refunded failures are retried)', parsePositiveInt, 3)
    .option(
      '--spend-cap <usd>',
      'the most the batch may spend: each row reserves its price before it starts (every model needs a known price)',
      parseFloat,
    )
    .option(...PRICE_OPTION)
    .option(...PRICES_OPTION)
    .option(...CARRY_OPTION)
    .option(...COLUMN_OPTION)
    .option('--deadline <iso>', 'rows not started by then end as not_run')
    .option(
      '--max-poll-wait <duration>',
      'longest wait for one creation to end (90s, 45m, 2h; default 30m); the row then fails and says so',
      parseDuration,
    )
    .option('--follow', 'show progress until the batch ends')
    .option('--json', 'print the final progress as JSON')
    .action(async (file: string, opts: RunCliOptions) => {
      const columns = userColumnsInput(opts);
      const { client, config, close } = await connectClient(process.env);
      try {
        const batchId =
          opts.batchId ??
          path
            .basename(file)
            .replace(/\.[^.]*$/, '')
            .replace(/[^A-Za-z0-9._:-]/g, '-');
        const { handle, attached, report } = await startOrAttachBatch({
          client,
          taskQueue: config.taskQueue,
          batchId,
          file,
          outDir: opts.out,
          concurrency: opts.concurrency,
          maxAttempts: opts.maxAttempts,
          ...(opts.model ? { defaultModel: opts.model } : {}),
          ...(opts.spendCap === undefined ? {} : { spendCapUsd: opts.spendCap }),
          ...(await pricesInput(opts)),
          ...columns,
          ...(opts.deadline ? { deadline: new Date(opts.deadline).toISOString() } : {}),
          ...(opts.maxPollWait === undefined ? {} : { maxPollWaitMs: opts.maxPollWait }),
        });
        stderr(`${attached ? 'attached to' : 'started'} batch ${batchId} (${report.validRows} rows)`);
        if (!opts.follow) {
          if (opts.json) process.stdout.write(`${JSON.stringify({ batchId, attached })}\n`);
          return;
        }
        const tty = process.stderr.isTTY && !opts.json;
        const final = await client.withAbortSignal(signal, () =>
          followBatch(
            handle,
            (p) => {
              if (tty) process.stderr.write(`\r\x1b[2K${progressLine(p, report.validRows)}`);
            },
            {
              onNoAnswer: (err) =>
                stderr(`${tty ? '\n' : ''}imagebatch: ${terminalText(err.message)} (still waiting; Ctrl-C stops)`),
            },
          ),
        );
        if (tty) process.stderr.write('\n');
        process.stdout.write(opts.json ? `${JSON.stringify(final)}\n` : `${progressLine(final, report.validRows)}\n`);
      } finally {
        await close();
      }
    });

  program
    .command('status <batch>')
    .description('Progress of a batch: counts per state, spend, rate, and why it waits')
    .option('--json', 'print as JSON')
    .action(async (batchId: string, opts: { json?: boolean }) => {
      await withClient(async (client) => {
        const p = await batchStatus(client, batchId);
        const total = p.rowsRead;
        process.stdout.write(opts.json ? `${JSON.stringify(p)}\n` : `${p.status}: ${progressLine(p, total)}\n`);
      });
    });

  for (const action of Object.values(BatchAction)) {
    program
      .command(`${action} <batch>`)
      .description(
        action === 'pause'
          ? 'Pause a batch: no new row starts, rows in flight finish'
          : action === 'resume'
            ? 'Resume a paused or stopped batch (after a top-up, a new key, or with a higher --spend-cap)'
            : 'Cancel a batch: no new row starts, rows in flight are cancelled',
      )
      .option('--spend-cap <usd>', 'resume only: a new spend cap', parseFloat)
      .option(PRICE_OPTION[0], `resume only: ${PRICE_OPTION[1]}`, PRICE_OPTION[2], PRICE_OPTION[3])
      .option(PRICES_OPTION[0], `resume only: ${PRICES_OPTION[1]}`)
      .option('--json', 'print the progress as JSON')
      .action(async (batchId: string, opts: { spendCap?: number; json?: boolean } & PriceCliOptions) => {
        const prices = await userPrices(opts);
        await withClient(async (client) => {
          const p = await controlBatch(client, batchId, action, {
            ...(opts.spendCap === undefined ? {} : { spendCapUsd: opts.spendCap }),
            ...(Object.keys(prices).length > 0 ? { prices } : {}),
          });
          process.stdout.write(opts.json ? `${JSON.stringify(p)}\n` : `${action}: ${p.status}\n`);
        });
      });
  }

  program
    .command('ls')
    .description('Batches with their states, newest first')
    .option('--json', 'print as JSON')
    .action(async (opts: { json?: boolean }) => {
      await withClient(async (client) => {
        const list = await listBatches(client);
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(list)}\n`
            : list.map((b) => `${b.batchId}\t${b.status}\t${b.startTime}`).join('\n') + (list.length ? '\n' : ''),
        );
      });
    });

  program
    .command('results <batch>')
    .description('Write results.csv, results.jsonl, errors.csv and the index.html gallery (also while it runs)')
    .option(
      '--out <dir>',
      'where to write (default: the batch output folder); for a batch Temporal no longer knows, its output folder',
    )
    .option('--json', 'print the written paths as JSON')
    .action(async (batchId: string, opts: { out?: string; json?: boolean }) => {
      await withClient(async (client) => {
        const written = await results({ client, batchId, ...(opts.out ? { outDir: path.resolve(opts.out) } : {}) });
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(written)}\n`
            : `${written.rows} rows -> ${written.resultsCsv}\ngallery: ${written.gallery}\n${resultFilesSummary(batchId, written).join('\n')}\n`,
        );
      });
    });

  program
    .command('reconcile <batch>')
    .description(
      'Resolve the rows whose money is unresolved (unknown, max wait reached, images unsaved) with their own keys, ' +
        'never a new one; rows that cannot be resolved are reported. A worker must be running',
    )
    .option('--out <dir>', "the batch's output folder (needed once Temporal has forgotten the batch)")
    .option('--max-poll-wait <duration>', 'longest wait for a followed creation to end (default 30m)', parseDuration)
    .option('--json', 'print the summary as JSON')
    .action(async (batchId: string, opts: { out?: string; maxPollWait?: number; json?: boolean }) => {
      const { client, config, close } = await connectClient(process.env);
      try {
        const outcome = await client.withAbortSignal(signal, () =>
          reconcile({
            client,
            taskQueue: config.taskQueue,
            batchId,
            ...(opts.out ? { outDir: path.resolve(opts.out) } : {}),
            ...(opts.maxPollWait === undefined ? {} : { maxPollWaitMs: opts.maxPollWait }),
          }),
        );
        process.stdout.write(
          opts.json ? `${JSON.stringify(outcome)}\n` : `${reconcileLines(outcome).map(terminalText).join('\n')}\n`,
        );
        if (outcome.summary.reported > 0 || outcome.summary.stoppedBy) result.code = ExitCode.Failure;
      } finally {
        await close();
      }
    });

  program
    .command('doctor')
    .description(
      "Check the image service with a worker's settings and key, without spending (--spend-one: one paid test)",
    )
    .option('--local', "run the checks in this process, with its own IMAGEGEN_* settings and key (not a worker's)")
    .option('--spend-one', 'submit ONE paid creation, show its record and mapping, save its image(s)')
    .option('--model <id>', '--spend-one: the model to test')
    .option('--test-id <name>', '--spend-one: names the test; its key is imagebatch-doctor/<name>/<model>')
    .option('--out <dir>', '--spend-one: folder of the record and the images (default doctor-out)')
    .option(
      '--max-wait <duration>',
      '--spend-one: longest wait for the creation (default 5m, at most 15m)',
      parseDuration,
    )
    .option('--json', 'print the report as JSON')
    .action(async ({ maxWait, ...opts }: DoctorCliOptions) => {
      const { exitCode } = await doctor({ ...opts, maxWaitMs: maxWait, env: process.env, signal });
      result.code = exitCode;
    });

  registerScheduleCommands(program);
  return { program, result };
}

interface DoctorCliOptions {
  local?: boolean;
  spendOne?: boolean;
  model?: string;
  testId?: string;
  out?: string;
  /** Milliseconds. */
  maxWait?: number;
  json?: boolean;
}

type ValidateCliOptions = { model?: string; catalog?: boolean; json?: boolean } & PriceCliOptions & ColumnCliOptions;

interface RunCliOptions extends PriceCliOptions, ColumnCliOptions {
  batchId?: string;
  model?: string;
  out: string;
  concurrency: number;
  maxAttempts: number;
  spendCap?: number;
  deadline?: string;
  /** Milliseconds. */
  maxPollWait?: number;
  follow?: boolean;
  json?: boolean;
}

function parseDuration(value: string): number {
  try {
    return parseDurationMs(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number of at least 1');
  return n;
}

/** One `--allow-origin` value, checked as an http(s) origin, added to those before it. */
function parseOrigins(value: string, previous: string[] | undefined): string[] {
  try {
    return [...(previous ?? []), parseAllowedOrigin(value)];
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('a port is an integer from 0 to 65535');
  return n;
}

/** Runs the CLI and resolves to its exit code; only the entry point (bin/imagebatch.js) exits the process. */
export async function main(argv: readonly string[]): Promise<number> {
  const secret = secretArgumentProblem(argv.slice(2));
  if (secret) {
    stderr(`imagebatch: ${secret}`);
    return ExitCode.Usage;
  }
  // The SDK's own log lines (worker state, bundler output) only when something is wrong. The worker installs its
  // own runtime (runWorker), with the Prometheus exporter when IMAGEBATCH_METRICS_ADDRESS asks for it.
  if (argv[2] !== 'worker') {
    const level = process.env.IMAGEBATCH_LOG_LEVEL === 'debug' ? 'DEBUG' : 'WARN';
    Runtime.install({ logger: new DefaultLogger(level, (entry) => sdkLog.write(entry)) });
  }
  const controller = new AbortController();
  setMaxListeners(0, controller.signal); // every client call in flight listens to it
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  const { program, result } = buildProgram(controller.signal);
  try {
    await program.parseAsync(argv);
    return result.code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    if (controller.signal.aborted) {
      stderr('imagebatch: interrupted; everything started was stopped');
      return ExitCode.Interrupted;
    }
    stderr(`imagebatch: ${terminalText(err instanceof Error ? err.message : String(err))}`);
    if (err instanceof BatchValidationError) {
      for (const p of err.report.problems) stderr(`  line ${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}`);
      if (err.report.problemsDropped > 0) stderr(`  ... and ${err.report.problemsDropped} more`);
      return ExitCode.InvalidInput;
    }
    if (err instanceof BatchFileChangedError || err instanceof PriceUnknownError) return ExitCode.InvalidInput;
    if (err instanceof PriceOptionError || err instanceof ColumnOptionError) return ExitCode.Usage;
    return ExitCode.Failure;
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
}
