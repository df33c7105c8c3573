import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPO_ROOT } from './dist';
import { stopChild } from './child-process';

const BIN = path.join(REPO_ROOT, 'bin', 'imagebatch.js');
const LOG_TAIL = 65_536;

/**
 * A worker child process (`node bin/imagebatch.js worker`), configured from its environment only, for the
 * CLI and the dev-server integration tests alike.
 */
export class WorkerProcess {
  private log = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const keep = (chunk: Buffer) => {
      this.log = (this.log + chunk.toString('utf8')).slice(-LOG_TAIL);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  /**
   * Starts a worker with exactly these settings (the test's own IMAGEGEN_* and TEMPORAL_* variables are not
   * inherited) and resolves once it polls.
   */
  static async start(options: {
    env: Record<string, string>;
    /** `--output-root`; by default the worker's working directory, the repository. */
    outputRoot?: string;
    /** The worker's working directory. @default the repository */
    cwd?: string;
    readyTimeoutMs?: number;
  }): Promise<WorkerProcess> {
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('IMAGEGEN_') && !k.startsWith('TEMPORAL_') && !k.startsWith('IMAGEBATCH_'),
      ),
    );
    const args = options.outputRoot ? ['--output-root', options.outputRoot] : [];
    const child = spawn(process.execPath, [BIN, 'worker', ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...inherited, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const worker = new WorkerProcess(child);
    try {
      await worker.waitFor(/worker polling/, options.readyTimeoutMs ?? 60_000);
    } catch (err) {
      await worker.kill();
      throw err;
    }
    return worker;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The last lines the worker wrote (stdout and stderr). */
  output(): string {
    return this.log;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  private async waitFor(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.log)) {
      if (!this.running) throw new Error(`the worker exited before it was ready:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`the worker was not ready within ${timeoutMs} ms:\n${this.log}`);
      await sleep(50);
    }
  }

  /** SIGKILL, as a crash would; resolves once the process has gone. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (the worker finishes what it runs), then SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    await stopChild(this.child, this.exited, graceMs);
  }
}
