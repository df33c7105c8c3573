import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { BatchValidationError } from './batches';
import { demo } from './commands/demo';
import { simulator } from './commands/simulator';
import { runWorker } from './commands/worker';

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

function buildProgram(signal: AbortSignal): { program: Command; result: { code: number } } {
  const result = { code: ExitCode.Ok as number };
  const program = new Command('imagebatch')
    .description('Bulk image generation from CSV prompts as durable Temporal workflows')
    .exitOverride()
    .showHelpAfterError();

  program
    .command('demo')
    .description('Run the bundled batch on the embedded Temporal dev server and the simulator (nothing to configure)')
    .option('--home <dir>', 'folder for the demo state and results', '.imagebatch')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { home: string; json?: boolean }) => {
      const tty = process.stderr.isTTY && !opts.json;
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
          `Batch "${res.batchId}" ${res.progress.status}: ${c.succeeded} succeeded, ${c.failed} failed, ` +
            `${c.unknown} unknown, ${c.cancelled} cancelled, ${c.not_run} not run; spent $${res.progress.spentUsd.toFixed(2)} ` +
            `(refunded $${res.progress.refundedUsd.toFixed(2)}).`,
          `Gallery:  ${res.galleryUrl}`,
          `Results:  ${res.results.resultsCsv}`,
          `          ${res.results.resultsJsonl}`,
          `Failures: ${res.results.errorsCsv} (${res.results.errorRows} rows; run them again with imagebatch run)`,
          ...(res.webUi ? [`Temporal Web UI (while a demo runs): ${res.webUi}`] : []),
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
    .command('worker')
    .description(
      'Run a worker for a Temporal cluster. Settings come from the environment only: TEMPORAL_ADDRESS, ' +
        'TEMPORAL_NAMESPACE, TEMPORAL_API_KEY / TEMPORAL_TLS_*, IMAGEBATCH_RATE_LIMIT, IMAGEGEN_BASE_URL, ' +
        'IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE (see the README)',
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
  return { program, result };
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('a port is an integer from 0 to 65535');
  return n;
}

/** Runs the CLI and resolves to its exit code; only the entry point (bin/imagebatch.js) exits the process. */
export async function main(argv: readonly string[]): Promise<number> {
  // The SDK's own log lines (worker state, bundler output) only when something is wrong.
  Runtime.install({ logger: new DefaultLogger(process.env.IMAGEBATCH_LOG_LEVEL === 'debug' ? 'DEBUG' : 'WARN') });
  const controller = new AbortController();
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
    stderr(`imagebatch: ${err instanceof Error ? err.message : String(err)}`);
    if (err instanceof BatchValidationError) {
      for (const p of err.report.problems) stderr(`  line ${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}`);
      if (err.report.problemsDropped > 0) stderr(`  ... and ${err.report.problemsDropped} more`);
      return ExitCode.InvalidInput;
    }
    return ExitCode.Failure;
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
}
