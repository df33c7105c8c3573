import { ErrorCode, ImagebatchError, type UserColumns } from '../model';
import { BatchFileError, ProblemCode, validateBatchFile, type BatchProblem } from '../batch';

/** Problems a failed run names at most (the rest are counted): `imagebatch validate` lists them all. */
export const RUN_PROBLEMS_SHOWN = 5;

/** Why a scheduled run cannot start. */
export const CannotStartReason = {
  /** The file is missing or cannot be read (or its URL answered 4xx). */
  Unreadable: 'unreadable',
  /** The file has problems, as `imagebatch validate` lists them. */
  Invalid: 'invalid',
  /** The source is refused: a URL on an address the download guard refuses, or a path outside the allowed folders. */
  Refused: 'refused',
} as const;
export type CannotStartReason = (typeof CannotStartReason)[keyof typeof CannotStartReason];

/** A scheduled run that cannot start: said at once, never retried (the next tick reads the file again). */
export class ScheduledRunCannotStartError extends ImagebatchError {
  readonly code = ErrorCode.ScheduledRunCannotStart;
  constructor(
    readonly reason: CannotStartReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** What the run's batch would check its file with. */
export interface SourceCheckOptions {
  defaultModel?: string;
  /** The schedule's own columns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
}

/**
 * Checks a scheduled run's source file as `imagebatch run` would before it starts anything: it must be readable
 * and have no problem (a file with a header and no rows is fine: an empty run). Throws
 * {@link ScheduledRunCannotStartError} naming the file, and each problem's line and reason as `validate` prints them.
 */
export async function checkScheduledSource(file: string, options: SourceCheckOptions): Promise<void> {
  let report;
  try {
    report = await validateBatchFile(file, {
      ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
      ...(options.userColumns ? { userColumns: options.userColumns } : {}),
    });
  } catch (err) {
    if (err instanceof BatchFileError) {
      throw new ScheduledRunCannotStartError(CannotStartReason.Unreadable, err.message, { cause: err });
    }
    throw err;
  }
  const problems = report.problems.filter((p) => p.code !== ProblemCode.FileNoRows);
  if (problems.length === 0) return;
  const more = report.problemCount - (report.problems.length - problems.length) - RUN_PROBLEMS_SHOWN;
  const lines = problems.slice(0, RUN_PROBLEMS_SHOWN).map((p) => problemLine(file, p));
  throw new ScheduledRunCannotStartError(
    CannotStartReason.Invalid,
    `the batch file has problems, nothing was started: ${lines.join('; ')}` +
      (more > 0 ? `; ... and ${more} more (imagebatch validate lists them)` : ''),
  );
}

/** A problem as `imagebatch validate` prints it: `file:line (field): message`. */
export function problemLine(file: string, p: BatchProblem): string {
  return `${file}:${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}`;
}
