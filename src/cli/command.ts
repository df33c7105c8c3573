import type { z } from 'zod';

/**
 * What a command is, for the table main.ts builds the program from: its name, arguments, options and description,
 * the schema that checks commander's raw values, and `run`, which takes the checked values and owns its output.
 */

/** Where a command writes and what it is given; main.ts passes the process's, tests their own. */
export interface CommandContext {
  /** The command's result (text or JSON), on standard output. */
  stdout: (text: string) => void;
  /** What a person reads, on standard error: whole lines (ending in `\n`), or a progress line redrawn in place. */
  stderr: (text: string) => void;
  /** Whether standard error is a terminal (a progress line is then redrawn in place). */
  stderrIsTTY: boolean;
  /** Where the Temporal and service settings come from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Aborted on Ctrl-C (SIGINT) and SIGTERM: the command stops what it started. */
  signal: AbortSignal;
}

/** A positional argument; every one is required. */
export interface ArgumentSpec {
  /** Its name in the usage line (`run <file>`) and its key in the schema's input. */
  name: string;
  /** What it is, for the reader of the table (the help shows its name only, in the usage line). */
  description: string;
}

/** An option as commander takes it. Its key in the schema's input is commander's (`--spend-cap` is `spendCap`). */
export interface OptionSpec {
  /** Commander's flags: `--spend-cap <usd>`, or `--json` for a switch. */
  flags: string;
  description: string;
  /**
   * The raw value when the option is not given, shown in the help and checked like a given one.
   * @default none: the key is absent
   */
  default?: string;
  /**
   * The option may be given several times: its raw value is the list of the values given.
   * @default false
   */
  repeatable?: boolean;
  /**
   * Commander refuses the command without it.
   * @default false
   */
  required?: boolean;
  /**
   * Accepted, but left out of `--help`: an option kept for scripts that give it, whose behaviour is now the default, or
   * a confirmation the refusal it answers names (`--allow-frequent`).
   * @default false
   */
  hidden?: boolean;
}

/** One command of the table. */
export interface CommandDefinition<S extends z.ZodType = z.ZodType> {
  /** The word after `imagebatch` (or after its group's name: `schedule create`). */
  name: string;
  /** Shown at the top of the command's own `--help`. */
  description: string;
  /** Its line in the list of its parent's `--help` (one line of 80 columns). @default the description */
  summary?: string;
  /** @default none */
  args?: readonly ArgumentSpec[];
  /** @default none */
  options?: readonly OptionSpec[];
  /**
   * Left out of `--help` (a command other commands start, not a person).
   * @default false
   */
  hidden?: boolean;
  /** Text shown after the options in `--help`. @default none */
  helpAfter?: string;
  /**
   * Checks the raw values, arguments by name and options by key, and gives `run` its typed input. An issue's path
   * names the option or argument; its message says what is wrong.
   */
  schema: S;
  /** Runs the command; resolves to its exit code (nothing: 0). Throws for a failure (main.ts maps it to a code). */
  run(input: z.output<S>, context: CommandContext): Promise<number | void>;
}

/** Commands under one word (`imagebatch schedule ...`). */
export interface CommandGroup {
  name: string;
  description: string;
  /** @default the description */
  summary?: string;
  commands: readonly CommandDefinition[];
}

/** A command definition, its `run` typed from its schema. */
export const defineCommand = <S extends z.ZodType>(definition: CommandDefinition<S>): CommandDefinition<S> =>
  definition;
