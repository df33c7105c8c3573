import { validateBatchFile, type BatchReport } from '../../batch';
import type { UserColumns } from '../../model';
import { BatchValidationError } from '../batches';

/** Whether a schedule's source is a URL: it is read by each run, never fetched by `create`. */
export const isUrlSource = (source: string) => /^https?:\/\//i.test(source);

/** A schedule's local file has problems: each with its line (main.ts prints them); exit 3, no schedule created. */
export class ScheduleFileInvalidError extends BatchValidationError {
  constructor(report: BatchReport) {
    super(report);
    this.message = `${report.problemCount} problem(s) in the batch file; no schedule was created`;
  }
}

/** What {@link checkScheduleSource} reads the file with: as each run reads it. */
export interface ScheduleSourceOptions {
  source: string;
  /** Model of rows that name none. @default none */
  defaultModel?: string;
  /** Columns the user owns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
}

/**
 * `schedule create`'s check of a local file, before anything connects: it exists, can be read and is valid, else a
 * {@link ScheduleFileInvalidError} (or the reader's own error for a file that cannot be read). A URL is not fetched:
 * undefined.
 */
export async function checkScheduleSource(options: ScheduleSourceOptions): Promise<BatchReport | undefined> {
  if (isUrlSource(options.source)) return undefined;
  const report = await validateBatchFile(options.source, {
    ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
    ...(options.userColumns ? { userColumns: options.userColumns } : {}),
  });
  if (!report.ok) throw new ScheduleFileInvalidError(report);
  return report;
}
