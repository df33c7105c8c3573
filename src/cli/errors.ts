import { ErrorCode, ImagebatchError } from '../model/errors';

/** Exit codes of the `imagebatch` command (the README's "Exit codes"). Only bin/imagebatch.js sets the process's. */
export const ExitCode = {
  Ok: 0,
  Failure: 1,
  /** Wrong options or arguments, or an unknown `IMAGEGEN_*`/`IMAGEBATCH_*` variable; nothing was started. */
  Usage: 2,
  /** The input file has problems; nothing was started or charged. */
  InvalidInput: 3,
  Interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * A command-line option or argument cannot be used: `option` names it (`--spend-cap`, `<batch>`), `problem` says what
 * is wrong. The message is the one line the CLI prints after `imagebatch: `. Exit 2 (usage).
 */
export class OptionError extends ImagebatchError {
  readonly code: ErrorCode = ErrorCode.OptionInvalid;
  constructor(
    readonly option: string,
    readonly problem: string,
  ) {
    super(`${option}: ${problem}`);
  }
}
