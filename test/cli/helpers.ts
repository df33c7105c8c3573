import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse/sync';
import { REPO_ROOT, ensureDistIsFresh } from '../helpers/dist';
import { WorkerProcess } from '../helpers/worker-process';

export { REPO_ROOT, ensureDistIsFresh, WorkerProcess };

/**
 * Helpers of the CLI tests: `node bin/imagebatch.js ...` as a user runs it (a child process with a bounded
 * run time and its own environment), a long-running `imagebatch worker` child, and a fresh build of dist/.
 */

export const BIN = path.join(REPO_ROOT, 'bin', 'imagebatch.js');

/** The test process's environment without any imagebatch, Temporal or image-service setting. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('IMAGEGEN_') || k.startsWith('TEMPORAL_') || k.startsWith('IMAGEBATCH_')) {
      continue;
    }
    env[k] = v;
  }
  // A test that means local mode says so: otherwise a command with no TEMPORAL_ADDRESS would start a local server.
  return { ...env, IMAGEBATCH_LOCAL: 'off', ...extra };
}

export interface CliResult {
  /** Exit code; null when the process was killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Options of {@link cli}. */
export interface CliOptions {
  /**
   * The child's whole environment.
   * @default baseEnv()
   */
  env?: Record<string, string>;
  /** @default the repository root */
  cwd?: string;
  /**
   * Longest run time; the process is then killed and the call rejects with its output.
   * @default 30_000
   */
  timeoutMs?: number;
}

/** Runs `node bin/imagebatch.js ...args` to its end and returns its exit code and output. */
export function cli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env ?? baseEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) {
        reject(
          new Error(
            `imagebatch ${args.join(' ')} did not end within ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`,
          ),
        );
      } else resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** Formats a result for an assertion message. */
export function describeRun(args: readonly string[], r: CliResult): string {
  return `imagebatch ${args.join(' ')} -> exit ${r.code}${r.signal ? ` (${r.signal})` : ''}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

/** Runs the CLI, expects exit 0 and returns its stdout parsed as JSON. */
export async function cliJson<T>(args: readonly string[], options: CliOptions = {}): Promise<T> {
  const r = await cli(args, options);
  if (r.code !== 0) throw new Error(`expected exit 0: ${describeRun(args, r)}`);
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON: ${describeRun(args, r)}`);
  }
}

/** Polls `probe` every `everyMs` until it returns a value, or throws after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? `: ${last.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(everyMs);
  }
}

/** A CSV file with a header line, as a spreadsheet would read it: one record per row, keyed by column. */
export async function readCsv(file: string): Promise<Record<string, string>[]> {
  return parse<Record<string, string>>(await readFile(file, 'utf8'), { columns: true });
}
