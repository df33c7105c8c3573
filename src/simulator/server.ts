import { createServer } from 'node:http';
import { API_PREFIX, ErrorCode } from '../api/contract';
import { type Clock } from './clock';
import { resolveConfig, type SimulatorConfigInput } from './config';
import { controlsOf, type SimulatorControls } from './control';
import { SimulatorEngine } from './engine';
import { createFilesServer, type SeenRequest } from './files';
import { ClientGoneError, closeServer, listen, writeJson } from './http';
import { type ChargeBook } from './charges';
import { StatePersistence } from './persistence';
import { errorResponse } from './responses';
import { createRouter, engineStats, type SimulatorStats } from './routes';

export { type FaultInput } from './control';

/** A running simulator: addresses, the charge book, run-time controls. */
export interface Simulator extends SimulatorControls {
  /** `http://127.0.0.1:<port>/api/public/v1` */
  readonly baseUrl: string;
  /** `http://127.0.0.1:<filesPort>`: where image URLs point (no key needed there). */
  readonly filesUrl: string;
  readonly port: number;
  readonly filesPort: number;
  /** Every charge and refund; its getters settle due creations first. */
  readonly charges: ChargeBook;
  readonly clock: Clock;
  /** Applies every finish (and refund) that is due on the clock. */
  settle(): void;
  /** The creation record as a poll would show it now (without touching the polling interval). */
  creation(id: string): object | undefined;
  /** Counts of retained state, to check that memory stays bounded. */
  stats(): SimulatorStats;
  /** Requests seen on the files port, newest last (at most 1000). */
  filesRequests(): readonly SeenRequest[];
  /**
   * Exceptions a handler threw (each answered with 500) and failed periodic saves of the state file: empty
   * unless something is wrong.
   */
  unexpectedErrors(): readonly string[];
  /** The config's `stateFile`, if any. */
  readonly stateFile: string | undefined;
  /**
   * Writes the state to `stateFile` now (atomically: a temporary file renamed over it). Rejects when no
   * `stateFile` is configured or the write fails.
   */
  saveState(): Promise<void>;
  /** Stops serving, then saves the state to `stateFile` when one is configured. */
  close(): Promise<void>;
}

/**
 * Starts the API server and the files server on loopback (ports 0 = chosen by the OS). With `stateFile`, the
 * state saved there is loaded first: a file that cannot be used is a {@link SimulatorConfigError} naming it.
 */
export async function startSimulator(config: SimulatorConfigInput = {}): Promise<Simulator> {
  const resolved = resolveConfig(config);
  const engine = new SimulatorEngine(resolved);
  const persistence = resolved.stateFile === undefined ? undefined : new StatePersistence(resolved.stateFile, engine);
  await persistence?.load();
  const router = createRouter(engine, resolved.maxBodyBytes);
  const errors: string[] = [];

  const api = createServer({ keepAliveTimeout: 5000 }, (req, res) => {
    router.handle(req, res).catch((err: unknown) => {
      if (err instanceof ClientGoneError) return;
      errors.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
      writeJson(res, errorResponse(ErrorCode.Internal, 'Internal error.'));
    });
  });
  api.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });

  const files = createFilesServer(
    (id) => engine.creations.get(id),
    () => engine.now(),
    resolved.files,
  );
  const port = await listen(api, resolved.port, resolved.host);
  let filesPort: number;
  try {
    filesPort = await listen(files.server, resolved.filesPort, resolved.host);
  } catch (err) {
    await closeServer(api);
    throw err;
  }
  const filesUrl = `http://${resolved.host}:${filesPort}`;
  const baseUrl = `http://${resolved.host}:${port}${API_PREFIX}`;
  engine.filesUrl = filesUrl;
  engine.apiUrl = baseUrl;

  const sweeper =
    resolved.sweepIntervalMs > 0 ? setInterval(() => engine.settle(), resolved.sweepIntervalMs).unref() : undefined;
  persistence?.startPeriodic((err) =>
    errors.push(`saving the state to ${persistence.file} failed: ${err instanceof Error ? err.message : String(err)}`),
  );

  let closing: Promise<void> | undefined;
  const simulator: Simulator = {
    baseUrl,
    filesUrl,
    port,
    filesPort,
    charges: engine.charges,
    clock: resolved.clock,
    settle: () => engine.settle(),
    ...controlsOf(engine),
    creation: (id) => {
      engine.settle();
      const c = engine.creations.get(id);
      return c && engine.record(c);
    },
    stats: () => engineStats(engine),
    filesRequests: () => files.seen,
    unexpectedErrors: () => errors,
    stateFile: resolved.stateFile,
    saveState: () =>
      persistence ? persistence.save() : Promise.reject(new Error('the simulator has no stateFile to save to')),
    close: () => {
      closing ??= (async () => {
        engine.closed = true;
        if (sweeper) clearInterval(sweeper);
        persistence?.stopPeriodic();
        router.cancelPending();
        engine.idempotency.releaseAll();
        await Promise.all([closeServer(api), closeServer(files.server)]);
        await persistence?.save();
      })();
      return closing;
    },
  };
  return simulator;
}
