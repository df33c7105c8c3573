import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type BatchProblem, type BatchReport, formatName, ProblemCode } from '../batch';
import type { UserColumns } from '../model';
import { csvText } from '../util/file-text';

/**
 * What the CLI makes of a batch file's report besides its problems: the columns carried by default, and the rows
 * `--skip-invalid` leaves out (written to `rejected.csv` beside the results).
 */

/** Problems most kept when rows may be skipped: each is a line of rejected.csv. */
export const SKIP_INVALID_MAX_PROBLEMS = 100_000;

/** The file name of the rejected rows, in the batch's output folder. */
export const REJECTED_FILE = 'rejected.csv';

/** Problems of a row that `--skip-invalid` may leave out: the rest of the file is read as it should be. */
const ROW_CODES: ReadonlySet<string> = new Set<string>([
  ProblemCode.InvalidUtf8,
  ProblemCode.InvalidQuote,
  ProblemCode.RaggedRow,
  ProblemCode.Malformed,
  ProblemCode.FieldInvalid,
  ProblemCode.ModelMissing,
  ProblemCode.IdInvalid,
  ProblemCode.JsonInvalid,
  ProblemCode.JsonUnknownKey,
  ProblemCode.JsonNestedValue,
]);

/** The batch's columns: the user's, with the carried ones as the report found them (every other one, by default). */
export function withCarried(user: UserColumns | undefined, report: BatchReport): UserColumns | undefined {
  const send = user?.send ?? {};
  if (report.carried.length === 0 && Object.keys(send).length === 0) return undefined;
  return {
    ...(report.carried.length ? { carry: [...report.carried] } : {}),
    ...(Object.keys(send).length ? { send } : {}),
  };
}

/**
 * What `validate` and `run` say about how the file was read, on stderr: its format when it is not comma CSV, and the
 * columns carried into the results, never sent.
 */
export function fileNotes(report: BatchReport): string[] {
  const notes: string[] = [];
  if (report.format !== 'comma') notes.push(`read as ${formatName(report.format)}`);
  if (report.carried.length > 0) {
    notes.push(
      `carried into the results, never sent: ${report.carried.join(', ')} (send one with --column <name>=<field>)`,
    );
  }
  return notes;
}

/**
 * Why `--skip-invalid` cannot run a file with problems, or undefined when it can: every problem is a row's own
 * (a field, a ragged row, a bad JSON line...). A problem of the whole file (its encoding, its header, a quote that
 * swallowed the rest, a record too large) or a row id used twice (two rows would run under one id) still refuses.
 */
export function skipRefusal(report: BatchReport): string | undefined {
  if (!report.complete) return 'the file could not be read to its end';
  if (report.problemsDropped > 0) return `the file has more than ${report.problems.length} problems`;
  const headerLine = report.headerLine ?? 1;
  const duplicate = report.problems.find((p) => p.code === ProblemCode.DuplicateId);
  if (duplicate)
    return `row id "${duplicate.rowId ?? ''}" is used twice (lines ${duplicate.firstLine} and ${duplicate.line})`;
  const whole = report.problems.find((p) => !ROW_CODES.has(p.code) || p.line <= headerLine);
  if (whole) return `line ${whole.line}: ${whole.message}`;
  if (report.validRows === 0) return 'no row is valid';
  return undefined;
}

/** The rows left out, for rejected.csv: one line per problem. */
export function rejectedCsv(problems: readonly BatchProblem[]): string {
  return csvText([
    ['line', 'id', 'field', 'code', 'problem'],
    ...problems.map((p) => [String(p.line), p.rowId ?? '', p.field ?? '', p.code, p.message]),
  ]);
}

/**
 * Writes the rows `--skip-invalid` leaves out to `<outDir>/rejected.csv` (written whole, then renamed into place),
 * and returns the line saying how many and where. With no problem, nothing is written (an older rejected.csv of the
 * folder is left as it is) and undefined is returned.
 */
export async function writeRejected(outDir: string, report: BatchReport): Promise<string | undefined> {
  if (report.problemCount === 0) return undefined;
  const file = path.join(outDir, REJECTED_FILE);
  await mkdir(outDir, { recursive: true });
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, rejectedCsv(report.problems));
  await rename(partial, file);
  // Rows csv-parse could not read at all (a stray quote) are not counted in `rows`: counted here by their line.
  const skipped = new Set(report.problems.map((p) => p.line)).size;
  return `skipped ${skipped} invalid row(s) (--skip-invalid): each with its line and problem in ${file}`;
}
