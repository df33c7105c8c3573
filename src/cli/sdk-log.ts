import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import type { LogEntry } from '@temporalio/worker';
import { FailureType } from '../model';
import { terminalText } from './terminal-text';

/** What a retried activity failure of a known type was, for the summary line. */
const RETRIED: Partial<Record<string, string>> = {
  [FailureType.Ambiguous]: 'a lost response retried with its key',
  [FailureType.Unreachable]: 'a service not reached retried (nothing sent)',
  [FailureType.RateLimited]: 'a rate limit waited out',
  [FailureType.Malformed]: 'a malformed response retried',
  [FailureType.DownloadFailed]: 'an image download retried',
};
/** How many different kinds of warning the summary line names. */
const SUMMARY_KINDS = 2;

/**
 * Where the Temporal SDK's own log lines go (the runtime's logger, installed once per process by main.ts), and
 * what was logged. By default standard error. A command that runs a worker in this process (the demo) sends them to
 * a log file, where an activity's retry with its stack is no alarm, and keeps the terminal for progress; at the end,
 * {@link summary} says in one line how many warnings the file got and what they were.
 */
export class SdkLog {
  private file: string | undefined;
  private sink: (text: string) => void = (text) => process.stderr.write(text);
  private warnings = 0;
  private errors = 0;
  /** Each kind of warning or error logged, in the order first seen. */
  private readonly kinds = new Set<string>();

  /** Appends the lines to `file` (its folder is made), under a line that says which run they are of. */
  toFile(file: string, run: string): void {
    mkdirSync(path.dirname(file), { recursive: true });
    appendFileSync(file, `--- ${new Date().toISOString()} ${run}\n`);
    this.file = file;
  }

  /** Sends the lines to `write` (standard error, through the progress display). */
  toWriter(write: (text: string) => void): void {
    this.file = undefined;
    this.sink = write;
  }

  write(entry: LogEntry): void {
    const meta = entry.meta && Object.keys(entry.meta).length ? entry.meta : undefined;
    const line =
      `${new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString()} [${entry.level}] ${entry.message}` +
      `${meta ? ` ${inspect(meta, { depth: 4, breakLength: Infinity })}` : ''}\n`;
    if (entry.level === 'WARN' || entry.level === 'ERROR') {
      if (entry.level === 'WARN') this.warnings += 1;
      else this.errors += 1;
      this.kinds.add(kindOf(entry));
    }
    if (this.file) appendFileSync(this.file, line);
    else this.sink(line);
  }

  /**
   * One line for the end of a run whose log went to a file, when warnings or errors were logged: `2 warnings logged
   * (a lost response retried with its key) — see <file>`.
   */
  summary(): string | undefined {
    if (!this.file || this.warnings + this.errors === 0) return undefined;
    const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
    const counts = [
      ...(this.errors > 0 ? [plural(this.errors, 'error')] : []),
      ...(this.warnings > 0 ? [plural(this.warnings, 'warning')] : []),
    ].join(' and ');
    const kinds = [...this.kinds];
    const named = kinds.slice(0, SUMMARY_KINDS).join('; ') + (kinds.length > SUMMARY_KINDS ? '; ...' : '');
    return `${counts} logged (${named}) — see ${this.file}`;
  }
}

/** What a warning or error was, in a few words: a retried failure by its type, else the SDK's message. */
function kindOf(entry: LogEntry): string {
  const error: unknown = entry.meta?.error;
  const type = error && typeof error === 'object' && 'type' in error ? String(error.type) : undefined;
  const known = type === undefined ? undefined : RETRIED[type];
  if (known) return known;
  const activity = typeof entry.meta?.activityType === 'string' ? ` (${entry.meta.activityType})` : '';
  const message = error instanceof Error ? `: ${error.message.split('\n')[0] ?? ''}` : '';
  return terminalText(`${entry.message}${activity}${message}`);
}

/** The process's SDK log (main.ts installs the runtime's logger on it). */
export const sdkLog = new SdkLog();
