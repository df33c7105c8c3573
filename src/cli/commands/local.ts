import { spawn } from 'node:child_process';
import path from 'node:path';
import { z } from 'zod';
import { checkWorkerSettings } from '../../config/worker-settings';
import { localHome, localPaths } from '../../local/home';
import { ensureLocal, localStatus, localTemporalEnv, stopLocal, webUiOf, type LocalStatus } from '../../local/local';
import { settingsPrint, workerVariables } from '../../local/settings';
import {
  removeState,
  WORKER_BEAT_MS,
  writeState,
  type ServerState,
  type WorkerState,
  readState,
} from '../../local/state';
import { connectClient, localOptions } from '../client';
import { defineCommand, type CommandGroup } from '../command';
import { flag } from '../options';
import { listBatches } from './batch-control';
import { runWorker } from './worker';

const homeOption = {
  flags: '--home <dir>',
  description: 'local mode home (default: $IMAGEBATCH_HOME, else imagebatch/local under your data folder)',
};
const homeSchema = { home: z.string().optional() };

type Env = Readonly<Record<string, string | undefined>>;
const pathsOf = (home: string | undefined, env: Env) => localPaths(home ? path.resolve(home) : localHome(env));

const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** `imagebatch local status`: what runs in the home, its ports and pids, the state's size, the batches. */
const statusCommand = defineCommand({
  name: 'status',
  description: 'What runs locally: the server and worker, their pids and ports, the state size, the batches',
  options: [homeOption, { flags: '--json', description: 'print as JSON' }],
  schema: z.object({ ...homeSchema, json: flag }),
  async run(opts, { stdout, env }) {
    const paths = pathsOf(opts.home, env);
    const status = await localStatus(paths);
    let batches: Awaited<ReturnType<typeof listBatches>> | undefined;
    if (status.server?.running) {
      const { client, close } = await connectClient({ ...localTemporalEnv(env, status.server.address) });
      try {
        batches = await listBatches(client);
      } finally {
        await close();
      }
    }
    if (opts.json) {
      stdout(`${JSON.stringify({ ...publicStatus(status), ...(batches ? { batches } : {}) })}\n`);
      return;
    }
    stdout(`${statusLines(status, batches).join('\n')}\n`);
  },
});

/** The status without the worker's settings hashes: the variables' names only. */
function publicStatus(status: LocalStatus) {
  const { worker, ...rest } = status;
  if (!worker) return rest;
  const { settings, ...shown } = worker;
  return { ...rest, worker: { ...shown, settings: Object.keys(settings.hashes) } };
}

function statusLines(status: LocalStatus, batches: Awaited<ReturnType<typeof listBatches>> | undefined): string[] {
  const { server, worker } = status;
  const lines = [`home:    ${status.home} (Temporal state ${megabytes(status.stateBytes)})`];
  if (server?.running) {
    lines.push(`server:  running, pid ${server.pid}, ${server.address}, since ${server.startedAt}`);
    lines.push(`Web UI:  ${webUiOf(server)}`);
  } else lines.push('server:  not running (imagebatch run starts it)');
  if (worker?.running) {
    lines.push(`worker:  running, pid ${worker.pid}, since ${worker.startedAt}`);
    lines.push(`         settings: ${Object.keys(worker.settings.hashes).join(', ') || '(none)'}`);
  } else lines.push('worker:  not running (imagebatch run or local start starts it)');
  if (batches) {
    lines.push(batches.length === 0 ? 'batches: none' : 'batches:');
    for (const b of batches) lines.push(`  ${b.batchId}\t${b.status}\t${b.startTime}`);
  }
  return lines;
}

/** `imagebatch local stop`: the worker, then the server; batches pause and resume with the next run. */
const stopCommand = defineCommand({
  name: 'stop',
  description: 'Stop the local worker and server cleanly; batches pause and the next run resumes them',
  options: [homeOption],
  schema: z.object(homeSchema),
  async run(opts, { stderr, env }) {
    const paths = pathsOf(opts.home, env);
    const stopped = await stopLocal(paths);
    if (stopped.worker === undefined && stopped.server === undefined) {
      stderr(`nothing runs in ${paths.home}\n`);
      return;
    }
    const what = [
      ...(stopped.worker === undefined ? [] : [`worker (pid ${stopped.worker})`]),
      ...(stopped.server === undefined ? [] : [`server (pid ${stopped.server})`]),
    ];
    stderr(`stopped the local ${what.join(' and ')}; running the same command again resumes its batches\n`);
  },
});

/**
 * `imagebatch local start`: the server and the worker, as `run` starts them, for schedules (their runs need a worker)
 * or batches started elsewhere. The worker takes this shell's settings, the image-service key among them.
 */
const startCommand = defineCommand({
  name: 'start',
  description: "Start the local server and worker (schedules' runs need the worker), with this shell's settings",
  options: [homeOption],
  schema: z.object(homeSchema),
  async run(opts, { stdout, stderr, env }) {
    const home = pathsOf(opts.home, env).home;
    // The worker's settings, checked as `run` checks them: a wrong one is one line naming it, before anything starts.
    checkWorkerSettings(env);
    const { server, worker } = await ensureLocal(localOptions(env, 'worker', (line) => stderr(`${line}\n`), home));
    stdout(`server: pid ${server.pid}, ${server.address}; worker: pid ${worker!.pid}\n`);
  },
});

/** `imagebatch local ui`: the Web UI's address (the server is started when it does not run); `--open` opens it. */
const uiCommand = defineCommand({
  name: 'ui',
  description: "Print the local Temporal Web UI's address (starting the server if needed); --open opens it",
  options: [homeOption, { flags: '--open', description: 'open it in the default browser' }],
  schema: z.object({ ...homeSchema, open: flag }),
  async run(opts, { stdout, stderr, env }) {
    const { server } = await ensureLocal(
      localOptions(env, 'server', (line) => stderr(`${line}\n`), pathsOf(opts.home, env).home),
    );
    const url = webUiOf(server);
    stdout(`${url}\n`);
    if (opts.open) openInBrowser(url);
  },
});

function openInBrowser(url: string): void {
  const command = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  const child = spawn(command, [url], { stdio: 'ignore', detached: true });
  child.on('error', () => undefined); // no opener: the address is printed already
  child.unref();
}

/**
 * `imagebatch local worker --home DIR` (not listed): the home's worker, started in a session of its own by the first
 * command that needs it, with that command's environment (the image-service key too). It polls the home's server,
 * rewrites worker.json every few seconds while it runs, and removes it when it stops (SIGTERM: `local stop`).
 */
const workerCommand = defineCommand({
  name: 'worker',
  description: 'The local worker (started by imagebatch run; not run by hand)',
  hidden: true,
  options: [homeOption],
  schema: z.object(homeSchema),
  async run(opts, { stderr, env, signal }) {
    const paths = pathsOf(opts.home, env);
    const server = readState<ServerState>(paths.serverState);
    if (!server) throw new Error(`no local server is recorded in ${paths.serverState}`);
    const startedAt = new Date().toISOString();
    const settings = settingsPrint(env);
    let beat: NodeJS.Timeout | undefined;
    const write = (shutdownGraceMs: number) => {
      const state: WorkerState = {
        pid: process.pid,
        address: server.address,
        startedAt,
        beatAt: new Date().toISOString(),
        shutdownGraceMs,
        settings,
      };
      writeState(paths.workerState, state);
    };
    try {
      await runWorker({
        env: localTemporalEnv(env, server.address),
        signal,
        log: (line) => stderr(`${new Date().toISOString()} ${line}\n`),
        onReady: ({ shutdownGraceMs }) => {
          write(shutdownGraceMs);
          beat = setInterval(() => write(shutdownGraceMs), WORKER_BEAT_MS);
        },
      });
    } finally {
      clearInterval(beat);
      if (readState<WorkerState>(paths.workerState)?.pid === process.pid) removeState(paths.workerState);
    }
    stderr(`${new Date().toISOString()} local worker stopped (variables: ${workerVariables(env).join(', ')})\n`);
  },
});

/** `imagebatch local ...`. */
export const localCommands: CommandGroup = {
  name: 'local',
  description: 'The local Temporal server and worker that imagebatch run starts when no TEMPORAL_ADDRESS is set',
  summary: 'The local Temporal server and worker',
  commands: [statusCommand, startCommand, stopCommand, uiCommand, workerCommand],
};
