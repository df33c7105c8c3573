import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { google } from '@temporalio/proto';
import { freePort } from '../util/net';
import { requireTemporalCli } from './toolchain';

/** Options of {@link DevServer.start}. */
export interface DevServerOptions {
  /**
   * SQLite file that keeps the server's state across restarts. Without it, state lives in memory and is
   * lost when the server stops.
   * @default undefined (in memory)
   */
  dbFile?: string;
  /**
   * Front-end gRPC port.
   * @default a free port
   */
  port?: number;
  /**
   * Web UI port; `false` runs the server headless.
   * @default a free port
   */
  uiPort?: number | false;
  /**
   * Dynamic configuration values, such as `limit.historyCount.suggestContinueAsNew: 100`.
   * @default {}
   */
  dynamicConfig?: Record<string, unknown>;
  /**
   * Custom search attributes to register at start, name to type (`Keyword`, `Int`, ...).
   * @default {}
   */
  searchAttributes?: Record<string, string>;
  /**
   * Server log level.
   * @default 'error'
   */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /**
   * How long to wait for the server to answer before giving up.
   * @default 60_000
   */
  startTimeoutMs?: number;
  /**
   * Path of the `temporal` binary.
   * @default the project's pinned CLI (see toolchain.ts; `requireTemporalCli(override)` honours a setting's binary)
   */
  executable?: string;
  /**
   * SQLite pragmas (`--sqlite-pragma NAME=VALUE`), such as `{ journal_mode: 'wal', synchronous: 'normal' }`:
   * the server's write throughput on a file depends on them (see BENCHMARKS.md).
   * @default {} (the server's own settings)
   */
  sqlitePragmas?: Record<string, string>;
  /**
   * Workflow execution retention of the `default` namespace, set right after start (`start-dev` has no flag for it).
   * @default DEV_SERVER_RETENTION_MS (7 days)
   */
  retentionMs?: number;
  /**
   * Receives what the server prints (standard output and error), as it comes: the demo keeps it in a log file.
   * @default dropped (the last few KiB of standard error still go into a start-up failure's message)
   */
  onOutput?: (text: string) => void;
  /**
   * Run the server in a session of its own, writing to this log file (appended), so that it outlives this process:
   * local mode's server (src/local). `onOutput` is then not called; a start-up failure quotes the log's tail.
   * @default undefined (a child of this process, stopped with it)
   */
  detachedLogFile?: string;
  /**
   * The server's environment, whole: `devServerEnv()` of src/config (an allow-list), never the caller's own, which
   * may hold the image service key and other secrets. No default: each starter says what the server gets.
   */
  env: Record<string, string>;
}

/** Retention of the dev server's `default` namespace (its own is 24 h): a batch run on Friday is still known on Monday. */
export const DEV_SERVER_RETENTION_MS = 7 * 24 * 3600 * 1000;

const STDERR_TAIL = 4096;
/** Longest wait for one readiness probe (two calls) before the next try. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * The embedded Temporal development server (`temporal server start-dev`), run as a child process that
 * this process owns. Unlike `@temporalio/testing`'s local environment it can keep its state in a SQLite
 * file, be stopped and started again on that file, and show the Web UI: the demo and the crash tests need
 * all three.
 */
/** Starts of a dev server that exited during start-up, at most (see {@link DevServer.start}). */
export const BIND_ATTEMPTS = 3;

/** The dev server exited before it answered: {@link DevServer.start} starts it again. */
class ExitedDuringStartUp extends Error {}

export class DevServer {
  private exited: Promise<number | null>;
  private stderrTail = '';
  /** Whether its output ever said a port was taken (a panic's trace may push that line out of the tail). */
  private portTaken = false;

  private constructor(
    private readonly child: ChildProcess,
    /** `host:port` of the gRPC front end. */
    readonly address: string,
    /** URL of the Web UI, when it runs. */
    readonly uiUrl: string | undefined,
    readonly options: DevServerOptions,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL);
      if (/address already in use/i.test(chunk.toString('utf8'))) this.portTaken = true;
      options.onOutput?.(chunk.toString('utf8'));
    });
    child.stdout?.on('data', (chunk: Buffer) => options.onOutput?.(chunk.toString('utf8')));
  }

  /**
   * Starts the server and resolves once it answers gRPC requests. A server that exits during start-up is started
   * again, its free ports chosen again, {@link BIND_ATTEMPTS} times at most: most often a port it was to bind was
   * taken meanwhile (a free port is free only until someone binds it; the CLI picks its HTTP API port at random), and
   * the server's panic may bury that line under a long trace. A server that does not answer in time is not.
   */
  static async start(options: DevServerOptions): Promise<DevServer> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await DevServer.startOnce(options);
      } catch (err) {
        if (attempt >= BIND_ATTEMPTS || !(err instanceof ExitedDuringStartUp)) throw err;
      }
    }
  }

  private static async startOnce(options: DevServerOptions): Promise<DevServer> {
    const executable = options.executable ?? requireTemporalCli();
    const host = '127.0.0.1';
    const port = options.port ?? (await freePort(host));
    const uiPort = options.uiPort === false ? undefined : (options.uiPort ?? (await freePort(host)));
    const args = ['server', 'start-dev', '--ip', host, '--port', String(port)];
    args.push('--log-level', options.logLevel ?? 'error');
    if (uiPort === undefined) args.push('--headless');
    else args.push('--ui-port', String(uiPort));
    if (options.dbFile) {
      mkdirSync(path.dirname(options.dbFile), { recursive: true });
      args.push('--db-filename', options.dbFile);
    }
    for (const [name, value] of Object.entries(options.sqlitePragmas ?? {})) {
      args.push('--sqlite-pragma', `${name}=${value}`);
    }
    for (const [key, value] of Object.entries(options.dynamicConfig ?? {})) {
      args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
    }
    for (const [name, type] of Object.entries(options.searchAttributes ?? {})) {
      args.push('--search-attribute', `${name}=${type}`);
    }
    const { env } = options;
    let child: ChildProcess;
    if (options.detachedLogFile) {
      mkdirSync(path.dirname(options.detachedLogFile), { recursive: true });
      const fd = openSync(options.detachedLogFile, 'a');
      try {
        child = spawn(executable, args, { env, stdio: ['ignore', fd, fd], detached: true });
      } finally {
        closeSync(fd);
      }
      child.unref();
    } else {
      child = spawn(executable, args, { env, stdio: ['ignore', options.onOutput ? 'pipe' : 'ignore', 'pipe'] });
    }
    const server = new DevServer(
      child,
      `${host}:${port}`,
      uiPort === undefined ? undefined : `http://${host}:${uiPort}`,
      options,
    );
    try {
      await server.waitUntilReady(options.startTimeoutMs ?? 60_000);
      await server.setRetention(options.retentionMs ?? DEV_SERVER_RETENTION_MS);
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  private async waitUntilReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let exitCode: number | null | undefined;
    void this.exited.then((code) => (exitCode = code));
    let lastError: unknown;
    while (Date.now() < deadline) {
      if (exitCode !== undefined) {
        const why = this.portTaken ? ' (a port it was to bind was taken)' : '';
        throw new ExitedDuringStartUp(
          `Temporal dev server exited with code ${exitCode} during start-up${why}: ${this.outputTail().trim()}`,
        );
      }
      try {
        const connection = await Connection.connect({ address: this.address, connectTimeout: 1000 });
        try {
          // Each probe has a deadline of its own: a server that accepts the call but never answers must not hold
          // start-up past `timeoutMs`.
          await connection.withDeadline(Math.min(deadline, Date.now() + PROBE_TIMEOUT_MS), async () => {
            await connection.workflowService.getSystemInfo({});
            // The default namespace is registered a moment after the front end answers.
            await connection.workflowService.describeNamespace({ namespace: 'default' });
          });
          return;
        } finally {
          await connection.close();
        }
      } catch (err) {
        lastError = err;
        await sleep(200);
      }
    }
    throw new Error(
      `Temporal dev server did not answer on ${this.address} within ${timeoutMs} ms: ${String(lastError)}`,
    );
  }

  /** The last few KiB the server wrote to standard error (or to its log file, when detached). */
  private outputTail(): string {
    const logFile = this.options.detachedLogFile;
    if (!logFile) return this.stderrTail;
    try {
      return readFileSync(logFile, 'utf8').slice(-STDERR_TAIL);
    } catch {
      return '';
    }
  }

  /** Sets the `default` namespace's workflow execution retention (whole seconds), kept in a `dbFile` too. */
  private async setRetention(retentionMs: number): Promise<void> {
    const connection = await Connection.connect({ address: this.address, connectTimeout: 5000 });
    try {
      await connection.withDeadline(Date.now() + PROBE_TIMEOUT_MS, () =>
        connection.workflowService.updateNamespace({
          namespace: 'default',
          config: {
            workflowExecutionRetentionTtl: google.protobuf.Duration.fromObject({
              seconds: Math.ceil(retentionMs / 1000),
            }),
          },
        }),
      );
    } finally {
      await connection.close();
    }
  }

  /** The process id of the server, for tests that kill it. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Stops the server: SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    try {
      await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills the server at once, as a crash would (SIGKILL). */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}
