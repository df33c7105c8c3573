import { setMaxListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command, CommanderError, Help, Option } from 'commander';
import type { z } from 'zod';
import { processEnv } from '../config/env';
import { checkKnownSettings } from '../config/known-settings';
import { loadLogLevel } from '../config/log-level';
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
  [ErrorCode.SettingUnknown]: ExitCode.Usage,
  [ErrorCode.PriceOptionInvalid]: ExitCode.Usage,
  [ErrorCode.PriceBelowCharged]: ExitCode.Usage,
  [ErrorCode.ColumnOptionInvalid]: ExitCode.Usage,
  [ErrorCode.BatchInvalid]: ExitCode.InvalidInput,
  [ErrorCode.BatchFileUnreadable]: ExitCode.InvalidInput,
  [ErrorCode.BatchFileChanged]: ExitCode.InvalidInput,
  [ErrorCode.BatchSourceOpen]: ExitCode.InvalidInput,
  [ErrorCode.PriceUnknown]: ExitCode.InvalidInput,
  [ErrorCode.ModelUnavailable]: ExitCode.InvalidInput,
};

/** The version of package.json (src/cli and dist/cli are both two folders below it). */
const VERSION = (
  JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;

/** The one line after a usage error (an unknown option or command): where the whole usage is. */
const usageHint = (command: string) => `imagebatch ${command ? `${command} ` : ''}--help for usage`;

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
    .description(definition.description)
    .showHelpAfterError(usageHint(commandPath(parent, definition.name)));
  if (definition.summary) command.summary(definition.summary);
  const args = definition.args ?? [];
  // The usage line names the arguments (`run [options] <file>`): their descriptions stay out of the help, which
  // fits one screen.
  for (const arg of args) command.argument(`<${arg.name}>`);
  for (const spec of definition.options ?? []) {
    const option = new Option(spec.flags, spec.description);
    if (spec.default !== undefined) option.default(spec.default);
    if (spec.repeatable) option.argParser((value: string, previous?: string[]) => [...(previous ?? []), value]);
    if (spec.required) option.makeOptionMandatory();
    if (spec.hidden) option.hideHelp();
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

/** The words after `imagebatch` of a command under `parent` (`schedule create`). */
function commandPath(parent: Command, name: string): string {
  const words = [name];
  for (let c: Command | null = parent; c?.parent; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

function buildProgram(context: CommandContext, result: { code: number }): Command {
  // The help of every command fits one screen (24 lines): no description above the root's command list, no
  // `help [command]` line in a list (`imagebatch help <command>` still works).
  const program = new Command('imagebatch')
    .usage('<command> [options]')
    .version(VERSION, '-V, --version', 'print the version')
    .exitOverride()
    // A usage error prints the error, commander's suggestion (`(Did you mean --follow?)`) and one line saying
    // where the usage is, not the whole help (which scrolled the suggestion away).
    .showHelpAfterError(usageHint(''))
    .configureHelp({
      visibleCommands(this: Help, command: Command) {
        return Help.prototype.visibleCommands.call(this, command).filter((c) => c.name() !== 'help');
      },
      // A command's own help leaves out `-h, --help`: its reader has found it.
      visibleOptions(this: Help, command: Command) {
        const options = Help.prototype.visibleOptions.call(this, command);
        return command.parent ? options.filter((o) => o.long !== '--help') : options;
      },
    })
    .configureOutput({
      writeOut: context.stdout,
      writeErr: context.stderr,
      // Commander echoes an unknown `--option=value` whole; the value may be a pasted API key, so it is never shown.
      outputError: (str, write) => write(str.replace(/(unknown option '[^'=\s]*=)[^']*'/g, "$1...'")),
    });
  for (const entry of COMMANDS) {
    if ('commands' in entry) {
      const group = program
        .command(entry.name)
        .description(entry.description)
        .showHelpAfterError(usageHint(entry.name));
      if (entry.summary) group.summary(entry.summary);
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
  const env = io.env ?? processEnv();
  const controller = new AbortController();
  setMaxListeners(0, controller.signal); // every client call in flight listens to it
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  const context: CommandContext = {
    stdout,
    stderr,
    stderrIsTTY: io.stderrIsTTY ?? process.stderr.isTTY === true,
    env,
    signal: controller.signal,
  };
  const result = { code: ExitCode.Ok as number };
  try {
    // A variable of ours that no setting reads (a typo) stops every command before it does anything.
    checkKnownSettings(env);
    if (!runsWorker) Runtime.install({ logger: new DefaultLogger(loadLogLevel(env), (e) => sdkLog.write(e)) });
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
