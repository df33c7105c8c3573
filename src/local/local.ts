import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { DEFAULT_SHUTDOWN_GRACE_MS } from '../config/temporal-config';
import { DevServer } from '../temporal/dev-server';
import { devServerBase } from './dev-server-base';
import { freePort } from '../util/net';
import { type LocalPaths } from './home';
import { withLock } from './lock';
import { pidAlive, stopPid } from './processes';
import { differingSettings } from './settings';
import { readState, removeState, writeState, WORKER_STALE_MS, type ServerState, type WorkerState } from './state';
import { LocalSettingsDifferError, LocalStartError } from './errors';

type Env = Readonly<Record<string, string | undefined>>;

const HOST = '127.0.0.1';
/** How long a local server or worker may take to answer after it was started. */
const START_TIMEOUT_MS = 120_000;
/** How much longer than its own shutdown grace a stopping worker is given before it is killed. */
const WORKER_STOP_MARGIN_MS = 7_000;
const workerStopGrace = (worker: WorkerState) =>
  (Number.isFinite(worker.shutdownGraceMs) ? worker.shutdownGraceMs : DEFAULT_SHUTDOWN_GRACE_MS) +
  WORKER_STOP_MARGIN_MS;
const SERVER_STOP_GRACE_MS = 15_000;
const LOG_TAIL = 2_048;

/** What local mode needs running: the server (to read), or the worker too (to run batches). */
export type LocalNeed = 'server' | 'worker';

/** Options of {@link ensureLocal}. */
export interface EnsureLocalOptions {
  paths: LocalPaths;
  need: LocalNeed;
  /** The worker's settings, the image-service key among them; a worker started now inherits them. */
  env: Env;
  /** The command that starts the worker, without `--home`: Node and the CLI's `local worker`. */
  workerCommand: readonly [string, ...string[]];
  /** Lines for a person: what was started. */
  log: (line: string) => void;
}

/** The local server and worker as {@link ensureLocal} left them. */
export interface LocalRunning {
  server: ServerState;
  worker?: WorkerState;
  /** What this call started. */
  started: { server: boolean; worker: boolean };
}

/**
 * Finds the home's server (and worker, if `need` says so), or starts it, under the home's lock: one server and one
 * worker per home, shared by every command of every shell. A server is running when its pid lives and its address
 * answers; a worker when its pid lives, its heartbeat is fresh and it polls the server's address. What is stale (a
 * crash, `kill -9`, a reboot) is cleaned up and started again on the same SQLite file, so batches resume.
 */
export async function ensureLocal(options: EnsureLocalOptions): Promise<LocalRunning> {
  const { paths } = options;
  return withLock(paths.lock, async () => {
    const started = { server: false, worker: false };
    let server = await runningServer(paths);
    if (!server) {
      server = await startServer(paths, options.env);
      started.server = true;
      options.log(`started the local Temporal server (pid ${server.pid}, ${server.address}; logs in ${paths.logs})`);
    }
    if (options.need === 'server') return { server, started, ...optional(runningWorker(paths, server)) };
    let worker = runningWorker(paths, server);
    if (worker) {
      const differing = differingSettings(worker.settings, options.env);
      if (differing.length > 0) throw new LocalSettingsDifferError(worker.pid, worker.startedAt, differing);
    } else {
      worker = await startWorker(paths, server, options);
      started.worker = true;
      options.log(`started the local worker (pid ${worker.pid}; logs in ${paths.workerLog})`);
    }
    return { server, worker, started };
  });
}

const optional = (worker: WorkerState | undefined) => (worker ? { worker } : {});

/** The server of server.json when it runs and answers; a process that is not it is left alone. */
async function runningServer(paths: LocalPaths): Promise<ServerState | undefined> {
  const state = readState<ServerState>(paths.serverState);
  if (!state || !pidAlive(state.pid)) return undefined;
  if (await answers(state.address)) return state;
  // A pid reused after a reboot is not ours to stop; where the command line cannot be read, only a server that answers
  // is taken for ours (above).
  if (isOurServer(state.pid, paths) !== true) return undefined;
  // Ours but silent: starting (its starter died), or wedged. Give it a while, then replace it.
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && pidAlive(state.pid)) {
    if (await answers(state.address)) return state;
    await sleep(500);
  }
  await stopPid(state.pid, 1_000);
  return undefined;
}

/** The worker of worker.json when its process lives, beats and polls `server`'s address. */
export function runningWorker(paths: LocalPaths, server: ServerState | undefined): WorkerState | undefined {
  const state = readState<WorkerState>(paths.workerState);
  if (!state || !pidAlive(state.pid)) return undefined;
  if (Date.now() - Date.parse(state.beatAt) > WORKER_STALE_MS) return undefined;
  if (server && state.address !== server.address) return undefined;
  return state;
}

/** Whether `pid` runs the Temporal dev server on this home's SQLite file; undefined where its command line is unknown. */
function isOurServer(pid: number, paths: LocalPaths): boolean | undefined {
  const command = commandLine(pid);
  return command === undefined ? undefined : command.includes('start-dev') && command.includes(paths.db);
}

/** A process's command line: /proc on Linux, `ps` elsewhere (macOS); undefined when neither tells. */
function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    try {
      const text = execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8', timeout: 2_000 });
      return text.trim() || undefined;
    } catch {
      return undefined;
    }
  }
}

/** Whether a Temporal front end answers at `address` within a couple of seconds. */
export async function answers(address: string): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 2_000 });
    await connection.withDeadline(Date.now() + 3_000, () => connection!.workflowService.getSystemInfo({}));
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

/** Starts the home's server with a small environment of its own: the CLI's (`env`) holds the worker's key. */
async function startServer(paths: LocalPaths, env: Env): Promise<ServerState> {
  const previous = readState<ServerState>(paths.serverState);
  // The same ports as last time when they are free, so that a bookmarked Web UI keeps working.
  const port = previous && (await portFree(previous.port)) ? previous.port : await freePort(HOST);
  let uiPort = previous && (await portFree(previous.uiPort)) ? previous.uiPort : await freePort(HOST);
  while (uiPort === port) uiPort = await freePort(HOST);
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  const server = await DevServer.start({
    dbFile: paths.db,
    port,
    uiPort,
    logLevel: 'warn',
    detachedLogFile: paths.serverLog,
    startTimeoutMs: START_TIMEOUT_MS,
    ...devServerBase(env),
  });
  const state: ServerState = {
    pid: server.pid!,
    address: server.address,
    port,
    uiPort,
    uiUrl: server.uiUrl!,
    startedAt: new Date().toISOString(),
  };
  writeState(paths.serverState, state);
  return state;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, HOST, () => probe.close(() => resolve(true)));
  });
}

/** Starts the worker process in a session of its own and waits until it says it polls (worker.json). */
async function startWorker(paths: LocalPaths, server: ServerState, options: EnsureLocalOptions): Promise<WorkerState> {
  const stale = readState<WorkerState>(paths.workerState);
  // A worker that lives but polls an address the server no longer has (it was restarted on other ports).
  if (stale && pidAlive(stale.pid) && isOurWorker(stale)) await stopPid(stale.pid, workerStopGrace(stale));
  removeState(paths.workerState);
  mkdirSync(paths.logs, { recursive: true });
  const logStart = fileSize(paths.workerLog);
  const fd = openSync(paths.workerLog, 'a');
  const [command, ...args] = options.workerCommand;
  const child = (() => {
    try {
      // The key reaches the worker in its environment only, never on its command line.
      return spawn(command, [...args, '--home', paths.home], {
        env: { ...options.env },
        stdio: ['ignore', fd, fd],
        detached: true,
      });
    } finally {
      closeSync(fd);
    }
  })();
  child.unref();
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const state = readState<WorkerState>(paths.workerState);
    if (state && state.pid === child.pid && state.address === server.address) return state;
    if (exited !== undefined || Date.now() > deadline) {
      if (exited === undefined) child.kill('SIGKILL');
      const why = exited === undefined ? `did not poll within ${START_TIMEOUT_MS / 1000} s` : `exited (${exited})`;
      throw new LocalStartError(`the local worker ${why}`, paths.workerLog, logTail(paths.workerLog, logStart));
    }
    await sleep(100);
  }
}

/** Whether worker.json's pid is the local worker: its command line says so, or (where it cannot be read) it beats. */
function isOurWorker(state: WorkerState): boolean {
  const command = commandLine(state.pid);
  if (command !== undefined) return /\blocal worker\b/.test(command);
  return Date.now() - Date.parse(state.beatAt) <= WORKER_STALE_MS;
}

const fileSize = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

/** The last line the worker wrote since `from`, for a start that failed (the worker's own messages name no secret). */
function logTail(file: string, from: number): string {
  try {
    const text = readFileSync(file).subarray(from).toString('utf8').slice(-LOG_TAIL);
    return (
      text
        .split('\n')
        .map((line) => line.trim())
        .filter(Boolean)
        .at(-1) ?? ''
    );
  } catch {
    return '';
  }
}

/** What local status shows: the server and the worker, running or not, and the state's size. */
export interface LocalStatus {
  home: string;
  server: (ServerState & { running: boolean }) | undefined;
  worker: (WorkerState & { running: boolean }) | undefined;
  /** Bytes of the SQLite file and its journal files. */
  stateBytes: number;
}

export async function localStatus(paths: LocalPaths): Promise<LocalStatus> {
  const server = readState<ServerState>(paths.serverState);
  const serverRunning = server !== undefined && pidAlive(server.pid) && (await answers(server.address));
  const worker = readState<WorkerState>(paths.workerState);
  const workerRunning = worker !== undefined && runningWorker(paths, serverRunning ? server : undefined) !== undefined;
  return {
    home: paths.home,
    server: server && { ...server, running: serverRunning },
    worker: worker && { ...worker, running: workerRunning },
    stateBytes: ['', '-wal', '-shm'].reduce((sum, suffix) => sum + fileSize(`${paths.db}${suffix}`), 0),
  };
}

/** What {@link stopLocal} stopped: the pids, undefined when nothing ran. */
export interface LocalStopped {
  worker?: number;
  server?: number;
}

/**
 * Stops the worker (it finishes or gives back what it runs, as on SIGTERM) and then the server, under the lock.
 * Batches pause where they stand; the next `imagebatch run` of the same file resumes them.
 */
export async function stopLocal(paths: LocalPaths): Promise<LocalStopped> {
  return withLock(paths.lock, async () => {
    const stopped: LocalStopped = {};
    const worker = readState<WorkerState>(paths.workerState);
    if (worker && pidAlive(worker.pid) && isOurWorker(worker)) {
      await stopPid(worker.pid, workerStopGrace(worker));
      stopped.worker = worker.pid;
    }
    removeState(paths.workerState);
    const server = readState<ServerState>(paths.serverState);
    const ours =
      server && pidAlive(server.pid) ? (isOurServer(server.pid, paths) ?? (await answers(server.address))) : false;
    if (server && ours) {
      await stopPid(server.pid, SERVER_STOP_GRACE_MS);
      stopped.server = server.pid;
    }
    // server.json stays, with its ports, for the next start; its pid is then gone.
    return stopped;
  });
}

/** The Web UI's page of the default namespace's workflows. */
export const webUiOf = (server: Pick<ServerState, 'uiUrl'>) => `${server.uiUrl}/namespaces/default/workflows`;

/** The Temporal settings of local mode: the local server's address, plaintext, `default` namespace. */
export function localTemporalEnv(env: Env, address: string): Record<string, string | undefined> {
  const kept = Object.fromEntries(
    Object.entries(env).filter(([name]) => !name.startsWith('TEMPORAL_') || name === 'TEMPORAL_TASK_QUEUE'),
  );
  return { ...kept, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: 'default', TEMPORAL_TLS: 'false' };
}
