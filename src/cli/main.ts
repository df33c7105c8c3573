import { setMaxListeners } from 'node:events';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command, CommanderError, Option } from 'commander';
import type { z } from 'zod';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { BatchValidationError } from './batches';
import type { CommandContext, CommandDefinition, CommandGroup } from './command';
import { codecServerCommand } from './commands/codec-server';
import { controlCommands } from './commands/control';
import { demoCommand } from './commands/demo';
import { doctorCommand } from './commands/doctor';
import { healthcheckCommand } from './commands/healthcheck';
import { localCommands } from './commands/local';
import { lsCommand } from './commands/ls';
import { reconcileCommand } from './commands/reconcile';
import { resultsCommand } from './commands/results';
import { runCommand } from './commands/run';
import { ledgerCommands } from './commands/ledger';
import { scheduleCommands } from './commands/schedule';
import { simulatorCommand } from './commands/simulator';
import { statusCommand } from './commands/status';
import { validateCommand } from './commands/validate';
import { workerCommand } from './commands/worker';
import { ExitCode, OptionError } from './errors';
import { secretArgumentProblem } from './secret-args';
import { sdkLog } from './sdk-log';
import { terminalText } from './terminal-text';

export { ExitCode } from './errors';

/** Every command, in the order `imagebatch --help` lists them. */
const COMMANDS: readonly (CommandDefinition | CommandGroup)[] = [
  demoCommand,
  simulatorCommand,
  codecServerCommand,
  workerCommand,
  healthcheckCommand,
  validateCommand,
  runCommand,
  statusCommand,
  ...controlCommands,
  lsCommand,
  resultsCommand,
  reconcileCommand,
  doctorCommand,
  localCommands,
  scheduleCommands,
  ledgerCommands,
];

/** The exit code of an error of ours, by its code; any other error is a failure. */
const EXIT_CODES: Partial<Record<ErrorCode, ExitCode>> = {
  [ErrorCode.OptionInvalid]: ExitCode.Usage,
  [ErrorCode.PriceOptionInvalid]: ExitCode.Usage,
  [ErrorCode.ColumnOptionInvalid]: ExitCode.Usage,
  [ErrorCode.BatchInvalid]: ExitCode.InvalidInput,
  [ErrorCode.BatchFileUnreadable]: ExitCode.InvalidInput,
  [ErrorCode.BatchFileChanged]: ExitCode.InvalidInput,
  [ErrorCode.BatchSourceOpen]: ExitCode.InvalidInput,
  [ErrorCode.PriceUnknown]: ExitCode.InvalidInput,
};

/** The schema's first issue as the option or argument it names (`--spend-cap`, `<batch>`) and what is wrong. */
function optionError(error: z.ZodError, definition: CommandDefinition): OptionError {
  const issue = error.issues[0];
  const key = issue?.path[0];
  const option = (definition.options ?? []).map((o) => new Option(o.flags)).find((o) => o.attributeName() === key);
  const name = option?.long ?? (typeof key === 'string' ? `<${key}>` : 'options');
  return new OptionError(name, issue?.message ?? 'cannot be used');
}

/** Adds one command of the table: commander reads the raw values, the schema checks them, `run` gets them typed. */
function addCommand(
  parent: Command,
  definition: CommandDefinition,
  context: CommandContext,
  result: { code: number },
): void {
  const command = parent
    .command(definition.name, definition.hidden ? { hidden: true } : {})
    .description(definition.description);
  const args = definition.args ?? [];
  for (const arg of args) command.argument(`<${arg.name}>`, arg.description);
  for (const spec of definition.options ?? []) {
    const option = new Option(spec.flags, spec.description);
    if (spec.default !== undefined) option.default(spec.default);
    if (spec.repeatable) option.argParser((value: string, previous?: string[]) => [...(previous ?? []), value]);
    if (spec.required) option.makeOptionMandatory();
    command.addOption(option);
  }
  if (definition.helpAfter) command.addHelpText('after', definition.helpAfter);
  // Commander passes the arguments, then the options, then the command.
  command.action(async (...values: unknown[]) => {
    const raw = {
      ...(values[args.length] as Record<string, unknown>),
      ...Object.fromEntries(args.map((arg, i) => [arg.name, values[i]])),
    };
    const parsed = definition.schema.safeParse(raw);
    if (!parsed.success) throw optionError(parsed.error, definition);
    result.code = (await definition.run(parsed.data, context)) ?? ExitCode.Ok;
  });
}

function buildProgram(context: CommandContext, result: { code: number }): Command {
  const program = new Command('imagebatch')
    .description('Bulk image generation from CSV prompts as durable Temporal workflows')
    .exitOverride()
    .showHelpAfterError()
    .configureOutput({
      writeOut: context.stdout,
      writeErr: context.stderr,
      // Commander echoes an unknown `--option=value` whole; the value may be a pasted API key, so it is never shown.
      outputError: (str, write) => write(str.replace(/(unknown option '[^'=\s]*=)[^']*'/g, "$1...'")),
    });
  for (const entry of COMMANDS) {
    if ('commands' in entry) {
      const group = program.command(entry.name).description(entry.description);
      for (const definition of entry.commands) addCommand(group, definition, context, result);
    } else addCommand(program, entry, context, result);
  }
  return program;
}

/** Where the CLI writes and what it reads; tests pass their own. */
export type CliIO = Pick<CommandContext, 'stdout' | 'stderr' | 'stderrIsTTY' | 'env'>;

/** Runs the CLI and resolves to its exit code; only the entry point (bin/imagebatch.js) exits the process. */
export async function main(argv: readonly string[], io: Partial<CliIO> = {}): Promise<number> {
  const stdout = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => void process.stderr.write(text));
  const secret = secretArgumentProblem(argv.slice(2));
  if (secret) {
    stderr(`imagebatch: ${secret}\n`);
    return ExitCode.Usage;
  }
  // The SDK's own log lines (worker state, bundler output) only when something is wrong. The worker installs its
  // own runtime (runWorker), with the Prometheus exporter when IMAGEBATCH_METRICS_ADDRESS asks for it; so does the local
  // worker (`local worker`).
  const runsWorker = argv[2] === 'worker' || (argv[2] === 'local' && argv[3] === 'worker');
  if (!runsWorker) {
    const level = process.env.IMAGEBATCH_LOG_LEVEL === 'debug' ? 'DEBUG' : 'WARN';
    Runtime.install({ logger: new DefaultLogger(level, (entry) => sdkLog.write(entry)) });
  }
  const controller = new AbortController();
  setMaxListeners(0, controller.signal); // every client call in flight listens to it
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  const context: CommandContext = {
    stdout,
    stderr,
    stderrIsTTY: io.stderrIsTTY ?? process.stderr.isTTY === true,
    env: io.env ?? process.env,
    signal: controller.signal,
  };
  const result = { code: ExitCode.Ok as number };
  try {
    await buildProgram(context, result).parseAsync(argv);
    return result.code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    if (controller.signal.aborted) {
      stderr('imagebatch: interrupted; everything started was stopped\n');
      return ExitCode.Interrupted;
    }
    stderr(`imagebatch: ${terminalText(err instanceof Error ? err.message : String(err))}\n`);
    if (err instanceof BatchValidationError) {
      for (const p of err.report.problems) stderr(`  line ${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}\n`);
      if (err.report.problemsDropped > 0) stderr(`  ... and ${err.report.problemsDropped} more\n`);
    }
    return (err instanceof ImagebatchError ? EXIT_CODES[err.code] : undefined) ?? ExitCode.Failure;
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
}
