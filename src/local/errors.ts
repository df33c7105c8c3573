import { ErrorCode, ImagebatchError } from '../model/errors';

/** A local mode setting cannot be used; the variable is named, its value is not quoted. */
export class LocalSettingError extends ImagebatchError {
  readonly code: ErrorCode = ErrorCode.ConfigInvalid;
  constructor(
    readonly variable: string,
    readonly problem: string,
  ) {
    super(`${variable}: ${problem}`);
  }
}

/** The local worker runs with other settings than this shell's: the variables that differ are named, never a value. */
export class LocalSettingsDifferError extends ImagebatchError {
  readonly code: ErrorCode = ErrorCode.LocalSettingsDiffer;
  constructor(
    readonly pid: number,
    readonly startedAt: string,
    readonly variables: readonly string[],
  ) {
    super(
      `the local worker (pid ${pid}, started ${startedAt}) runs with other settings than this shell's ` +
        `(${variables.join(', ')}); run with the same settings, or stop it with \`imagebatch local stop\` ` +
        '(its batches pause and resume with the next run)',
    );
  }
}

/** The local server or worker did not start; `log` is where its output went. */
export class LocalStartError extends ImagebatchError {
  readonly code: ErrorCode = ErrorCode.LocalStartFailed;
  constructor(
    readonly what: string,
    readonly log: string,
    readonly lastLine: string,
  ) {
    super(`${what}${lastLine ? `: ${lastLine}` : ''} (its log: ${log})`);
  }
}
