import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEMO_API_KEY } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { stopChild } from '../../test/helpers/child-process';

/** The repository root. */
export const REPO_ROOT = path.resolve(__dirname, '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'imagebatch.js');
const LOG_TAIL = 32_768;

/**
 * The dev server as the benchmarks run it: state in a SQLite file (as the demo keeps it), with the pragmas and
 * dynamic config that measured best on 2 cores (see BENCHMARKS.md, "Tuning").
 */
export const TUNED_SQLITE_PRAGMAS = { journal_mode: 'wal', synchronous: 'off' } as const;

/** Starts the dev server on `dbFile` (in memory when undefined), headless. */
export async function startDevServer(options: {
  dbFile: string | undefined;
  pragmas?: Record<string, string>;
  dynamicConfig?: Record<string, unknown>;
}): Promise<DevServer> {
  return DevServer.start({
    ...devServerBase(),
    uiPort: false,
    ...(options.dbFile ? { dbFile: options.dbFile, sqlitePragmas: options.pragmas ?? TUNED_SQLITE_PRAGMAS } : {}),
    ...(options.dynamicConfig ? { dynamicConfig: options.dynamicConfig } : {}),
  });
}

/** A child process whose output is kept (the last few kB) for error messages. */
export class Child {
  private log = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** When the process was spawned (ms since the epoch). */
  readonly startedAt = Date.now();

  constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const keep = (chunk: Buffer) => {
      this.log = (this.log + chunk.toString('utf8')).slice(-LOG_TAIL);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  output(): string {
    return this.log;
  }

  async waitFor(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.log)) {
      if (!this.running) throw new Error(`the process exited before it was ready:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`not ready within ${timeoutMs} ms:\n${this.log}`);
      await sleep(20);
    }
  }

  /** SIGKILL, as a crash would. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    await stopChild(this.child, this.exited, graceMs);
  }
}

/**
 * The ledger store of a bench run, in its folder (the worker's output root, the CLI's working folder: the same one in
 * a stack). Without it every run would share the machine's default store, the user's own, and a batch id run again
 * on other content would be refused.
 */
const LEDGER_FILE = 'ledger.sqlite';

/** The environment of a child: the bench's own, minus every imagebatch, image-service and Temporal setting. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('IMAGEGEN_') && !k.startsWith('TEMPORAL_') && !k.startsWith('IMAGEBATCH_'),
    ),
  );
  return { ...inherited, ...extra };
}

/** Options of {@link startWorker}. */
export interface BenchWorkerOptions {
  temporalAddress: string;
  taskQueue: string;
  baseUrl: string;
  /** Folder relative output folders resolve against. */
  outputRoot: string;
  /** Worker settings (IMAGEBATCH_*, IMAGEGEN_*) on top of the address, queue, base URL and key. */
  env?: Record<string, string>;
  /** Node flags, such as `--cpu-prof`. */
  nodeArgs?: string[];
}

/** The product's worker, `node bin/imagebatch.js worker`, configured by environment; resolves once it polls. */
export async function startWorker(options: BenchWorkerOptions): Promise<Child> {
  const child = new Child(
    spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, 'worker', '--output-root', options.outputRoot], {
      cwd: options.outputRoot,
      env: cleanEnv({
        TEMPORAL_ADDRESS: options.temporalAddress,
        TEMPORAL_TASK_QUEUE: options.taskQueue,
        IMAGEGEN_BASE_URL: options.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        // The bench's own store, in its folder: never the machine's default one (see startCli).
        IMAGEBATCH_LEDGER: path.join(options.outputRoot, LEDGER_FILE),
        ...options.env,
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  try {
    await child.waitFor(/worker polling/, 120_000);
  } catch (err) {
    await child.kill();
    throw err;
  }
  return child;
}

/** Runs the CLI (`node bin/imagebatch.js ...args`) against the dev server; the caller awaits `exited`. */
export function startCli(
  args: string[],
  options: { temporalAddress: string; taskQueue: string; cwd: string; env?: Record<string, string> },
): Child {
  return new Child(
    spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd,
      env: cleanEnv({
        TEMPORAL_ADDRESS: options.temporalAddress,
        TEMPORAL_TASK_QUEUE: options.taskQueue,
        IMAGEBATCH_LEDGER: path.join(options.cwd, LEDGER_FILE),
        ...options.env,
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}
