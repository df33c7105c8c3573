import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { clientDataConverter, payloadCodecsFromEnv } from '../codec';
import { checkWorkerSettings } from '../config/worker-settings';
import { connectionOptions, loadTemporalConfig, type TemporalConfig } from '../config/temporal-config';
import { IMAGEBATCH_LOCAL_ENV } from '../config/local-config';
import { localHome, localModeAllowed, localPaths } from '../local/home';
import { AddressSource, connectError } from './connect-error';
import { ensureLocal, localTemporalEnv, type LocalNeed, type LocalRunning } from '../local/local';
import { projectRoot } from '../temporal/toolchain';

type Env = Readonly<Record<string, string | undefined>>;

const CONNECT_TIMEOUT_MS = 10_000;

/** Options of {@link connectClient}. */
export interface ConnectOptions {
  /**
   * In local mode (no Temporal address configured), what must run in the home: the server, or the worker too.
   * @default 'server'
   */
  local?: LocalNeed;
  /**
   * Lines for a person: what local mode started.
   * @default dropped
   */
  log?: (line: string) => void;
}

/** A connected client, its settings, how to close it, and local mode's server and worker when it is local. */
export interface ConnectedClient {
  client: Client;
  config: TemporalConfig;
  close: () => Promise<void>;
  /** Set in local mode: what runs in the home (and what this call started). */
  local?: LocalRunning & { home: string };
}

/** How a local worker is started: this Node, the CLI's entry point, `local worker`. */
export const LOCAL_WORKER_COMMAND = [
  process.execPath,
  path.join(projectRoot, 'bin', 'imagebatch.js'),
  'local',
  'worker',
] as const;

/**
 * A Temporal client from the standard environment variables, and how to close it. With no address configured (no
 * `TEMPORAL_ADDRESS`, no profile naming one) it is local mode, unless `IMAGEBATCH_LOCAL=off`: the home's server,
 * started if it does not run, and its worker when `options.local` asks for it (src/local).
 */
export async function connectClient(env: Env, options: ConnectOptions = {}): Promise<ConnectedClient> {
  let config = loadTemporalConfig(env);
  // The same payload keys as the worker's (IMAGEBATCH_PAYLOAD_KEY): inputs, signals, queries and results are encrypted;
  // compressed payloads are read whatever IMAGEBATCH_PAYLOAD_COMPRESSION says.
  const codecs = payloadCodecsFromEnv(env);
  let local: ConnectedClient['local'];
  if (config.addressFrom === undefined && localModeAllowed(env)) {
    const need = options.local ?? 'server';
    // The worker's settings are checked here, where a wrong one is one line naming it, before anything starts.
    if (need === 'worker') {
      checkWorkerSettings(env);
    }
    const home = localHome(env);
    const running = await ensureLocal(localOptions(env, need, options.log));
    local = { ...running, home };
    config = loadTemporalConfig(localTemporalEnv(env, running.server.address));
  }
  const connection = await Connection.connect({
    ...connectionOptions(config),
    connectTimeout: CONNECT_TIMEOUT_MS,
  }).catch((error: unknown) => {
    const source = local
      ? AddressSource.Local
      : (config.addressFrom ?? `the default address (${IMAGEBATCH_LOCAL_ENV}=off)`);
    throw connectError({ error, address: config.address, source, timeoutMs: CONNECT_TIMEOUT_MS });
  });
  return {
    client: new Client({ connection, namespace: config.namespace, dataConverter: clientDataConverter(codecs) }),
    config,
    close: () => connection.close(),
    ...(local ? { local } : {}),
  };
}

/** What {@link ensureLocal} needs, for the home of `env` (or `home`). */
export const localOptions = (
  env: Env,
  need: LocalNeed,
  log: ((line: string) => void) | undefined,
  home: string = localHome(env),
) => ({
  paths: localPaths(home),
  need,
  env,
  workerCommand: LOCAL_WORKER_COMMAND,
  log: log ?? (() => undefined),
});

/** How often a command that follows a local batch checks that the local server and worker still run. */
const LOCAL_CHECK_MS = 10_000;

/**
 * While a command follows a local batch: every {@link LOCAL_CHECK_MS}, starts the local server or worker again if it
 * has gone (a crash, an out-of-memory kill), as a cluster's orchestrator would, saying so through `log`. Returns the
 * function that stops watching.
 */
export function superviseLocal(env: Env, log: (line: string) => void): () => void {
  let checking = false;
  let lastProblem = '';
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    ensureLocal(localOptions(env, 'worker', log))
      .then(() => (lastProblem = ''))
      .catch((err: unknown) => {
        const problem = err instanceof Error ? err.message : String(err);
        if (problem !== lastProblem) log(`imagebatch: the local worker cannot be started again: ${problem}`);
        lastProblem = problem;
      })
      .finally(() => (checking = false));
  }, LOCAL_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** Runs `fn` with a client from the environment (local mode: the home's server), and closes it whatever happens. */
export async function withClient(
  fn: (client: Client) => Promise<void>,
  env: Env,
  options: ConnectOptions = {},
): Promise<void> {
  const { client, close } = await connectClient(env, options);
  try {
    await fn(client);
  } finally {
    await close();
  }
}
