import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { API_PREFIX, ErrorCode, type StatusNamingName } from '../api/contract';
import { type Clock } from './clock';
import { resolveConfig, type IdempotencyVariant, type SimulatorConfigInput } from './config';
import { applyControl, type ControlCommand, type LimitsPatch } from './control';
import { SimulatorEngine, type Reply } from './engine';
import { type Fault, type FaultKind, type FaultSettings } from './faults';
import { createFilesServer, type SeenRequest } from './files';
import { ClientGoneError, closeServer, listen, readBody, writeJson } from './http';
import { type Ledger } from './ledger';
import { StatePersistence } from './persistence';
import { errorResponse } from './responses';

/** A fault as scripts and controls accept it: its kind, or `{ kind, delayMs }`. */
export type FaultInput = FaultKind | Fault;

/** A running simulator: addresses, the ledger, run-time controls. */
export interface Simulator {
  /** `http://127.0.0.1:<port>/api/public/v1` */
  readonly baseUrl: string;
  /** `http://127.0.0.1:<filesPort>`: where image URLs point (no key needed there). */
  readonly filesUrl: string;
  readonly port: number;
  readonly filesPort: number;
  /** Every charge and refund; its getters settle due creations first. */
  readonly ledger: Ledger;
  readonly clock: Clock;
  /** Applies every finish (and refund) that is due on the clock. */
  settle(): void;
  /** Applies a control command (the same as `POST /_sim/control`). */
  control(command: ControlCommand): void;
  /** Replaces the fault settings; fields left out are off. */
  setFaults(settings: Partial<FaultSettings>): void;
  /** Faults handed out to submissions since this simulator started, by kind (`none` included). */
  faultCounts(): Record<FaultKind, number>;
  /** Submissions whose prompt contains `match` get these faults, one per submission, in order. */
  scriptFor(match: string, faults: readonly FaultInput[]): void;
  revokeKey(keyId: string): void;
  addKey(accountId: string, keyId: string, key: string): void;
  setAccountDisabled(accountId: string, disabled: boolean): void;
  setWallet(accountId: string, usd: number): void;
  walletUsd(accountId: string): number;
  setMonthlyBudget(keyId: string, usd: number | null): void;
  setIdempotencyVariant(variant: IdempotencyVariant): void;
  setStatusNaming(naming: StatusNamingName): void;
  setLimits(limits: LimitsPatch): void;
  /** The creation record as a poll would show it now (without touching the polling interval). */
  creation(id: string): object | undefined;
  /** Counts of retained state, to check that memory stays bounded. */
  stats(): { creations: number; inFlight: number; idempotencyEntries: number; ledgerEntries: number };
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

const SIM_PREFIX = '/_sim/';

/**
 * Starts the API server and the files server on loopback (ports 0 = chosen by the OS). With `stateFile`, the
 * state saved there is loaded first: a file that cannot be used is a {@link SimulatorConfigError} naming it.
 */
export async function startSimulator(config: SimulatorConfigInput = {}): Promise<Simulator> {
  const resolved = resolveConfig(config);
  const engine = new SimulatorEngine(resolved);
  const persistence = resolved.stateFile === undefined ? undefined : new StatePersistence(resolved.stateFile, engine);
  await persistence?.load();
  const timers = new Set<NodeJS.Timeout>();
  const errors: string[] = [];

  const api = createServer({ keepAliveTimeout: 5000 }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof ClientGoneError) return;
      errors.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
      writeJson(res, errorResponse(ErrorCode.Internal, 'Internal error.'));
    });
  });
  api.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path.startsWith(SIM_PREFIX)) return simEndpoint(req, res, path);
    if (!path.startsWith(`${API_PREFIX}/`)) {
      return writeJson(res, errorResponse(ErrorCode.NotFound, 'No such endpoint.', { path }));
    }
    const auth = engine.keys.authenticate(req.headers);
    if (!auth.ok) return writeJson(res, { status: auth.status, body: { detail: auth.detail } });
    const principal = auth.principal;
    const route = path.slice(API_PREFIX.length);

    if (route === '/creations' && req.method === 'POST') {
      const read = await readBody(req, resolved.maxBodyBytes);
      const outcome = await engine.submit(principal, {
        headers: req.headers,
        body: read.body,
        tooLarge: read.tooLarge,
      });
      return deliver(res, outcome, read.abandoned);
    }
    const limited = engine.rateLimit(principal);
    if (limited) return writeJson(res, limited);
    if (route === '/models' && req.method === 'GET') return writeJson(res, engine.models(principal));
    if (route.startsWith('/creations/') && req.method === 'GET') {
      let id: string;
      try {
        id = decodeURIComponent(route.slice('/creations/'.length));
      } catch {
        id = '';
      }
      return writeJson(res, engine.poll(principal, id));
    }
    return writeJson(res, errorResponse(ErrorCode.NotFound, 'No such endpoint.', { method: req.method, path }));
  }

  function deliver(res: ServerResponse, outcome: Reply, closeAfter: boolean): void {
    const extra: Record<string, string> | undefined = closeAfter ? { connection: 'close' } : undefined;
    const delivery = outcome.delivery;
    switch (delivery.kind) {
      case 'send':
        writeJson(res, outcome.response, extra);
        outcome.done?.();
        return;
      case 'reset':
        res.socket?.resetAndDestroy();
        outcome.done?.();
        return;
      case 'slow': {
        const timer = setTimeout(() => {
          timers.delete(timer);
          writeJson(res, outcome.response, extra);
          outcome.done?.();
        }, delivery.delayMs);
        timers.add(timer);
        return;
      }
    }
  }

  async function simEndpoint(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    if (path === '/_sim/ledger' && req.method === 'GET') {
      return writeJson(res, { status: 200, body: engine.ledger.snapshot() });
    }
    if (path === '/_sim/state' && req.method === 'GET') {
      return writeJson(res, { status: 200, body: { ...simulator.stats(), scripts: engine.faults.pendingScripts() } });
    }
    if (path === '/_sim/control' && req.method === 'POST') {
      const read = await readBody(req, resolved.maxBodyBytes);
      try {
        applyControl(engine, JSON.parse(read.body.toString('utf8')));
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        return writeJson(res, errorResponse(ErrorCode.InvalidRequest, message));
      }
      return writeJson(res, { status: 200, body: { ok: true } });
    }
    return writeJson(res, errorResponse(ErrorCode.NotFound, 'No such simulator endpoint.', { path }));
  }

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
  engine.filesUrl = filesUrl;

  const sweeper =
    resolved.sweepIntervalMs > 0 ? setInterval(() => engine.settle(), resolved.sweepIntervalMs).unref() : undefined;
  persistence?.startPeriodic((err) =>
    errors.push(`saving the state to ${persistence.file} failed: ${err instanceof Error ? err.message : String(err)}`),
  );

  let closing: Promise<void> | undefined;
  const simulator: Simulator = {
    baseUrl: `http://${resolved.host}:${port}${API_PREFIX}`,
    filesUrl,
    port,
    filesPort,
    ledger: engine.ledger,
    clock: resolved.clock,
    settle: () => engine.settle(),
    control: (command) => applyControl(engine, command),
    setFaults: (settings) => applyControl(engine, { op: 'setFaults', faults: settings }),
    faultCounts: () => engine.faults.counts(),
    scriptFor: (match, faults) => applyControl(engine, { op: 'script', match, faults: [...faults] }),
    revokeKey: (keyId) => applyControl(engine, { op: 'revokeKey', keyId }),
    addKey: (accountId, keyId, key) => applyControl(engine, { op: 'addKey', accountId, keyId, key }),
    setAccountDisabled: (accountId, disabled) =>
      applyControl(engine, { op: 'setAccountDisabled', accountId, disabled }),
    setWallet: (accountId, usd) => applyControl(engine, { op: 'setWallet', accountId, usd }),
    walletUsd: (accountId) => {
      engine.settle();
      return engine.billing.balanceUsd(accountId);
    },
    setMonthlyBudget: (keyId, usd) => applyControl(engine, { op: 'setMonthlyBudget', keyId, usd }),
    setIdempotencyVariant: (variant) => applyControl(engine, { op: 'setIdempotencyVariant', variant }),
    setStatusNaming: (naming) => applyControl(engine, { op: 'setStatusNaming', naming }),
    setLimits: (limits) => applyControl(engine, { op: 'setLimits', limits }),
    creation: (id) => {
      engine.settle();
      const c = engine.creations.get(id);
      return c && engine.record(c);
    },
    stats: () => {
      engine.settle();
      return {
        creations: engine.creations.size,
        inFlight: engine.creations.inFlight,
        idempotencyEntries: engine.idempotency.size,
        ledgerEntries: engine.ledger.entries().length,
      };
    },
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
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        engine.idempotency.releaseAll();
        await Promise.all([closeServer(api), closeServer(files.server)]);
        await persistence?.save();
      })();
      return closing;
    },
  };
  return simulator;
}
