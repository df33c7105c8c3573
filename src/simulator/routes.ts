import { type IncomingMessage, type ServerResponse } from 'node:http';
import { API_PREFIX, ErrorCode } from '../api/contract';
import { applyControl } from './control';
import { type Reply, type SimulatorEngine } from './engine';
import { readBody, writeJson } from './http';
import { errorResponse, type Delivery } from './responses';

const SIM_PREFIX = '/_sim/';

/** The simulator's counts of retained state and of polls, as `GET /_sim/state` shows them. */
export interface SimulatorStats {
  creations: number;
  inFlight: number;
  idempotencyEntries: number;
  /** Entries of the charge book (the name `GET /_sim/state` has always shown). */
  ledgerEntries: number;
  /** Polls of a known creation answered since start. */
  polls: number;
  /** Of those, the ones refused (429) as sooner than the minimum poll interval (`min_poll_interval`). */
  pollsTooSoon: number;
}

/** Counts of retained state, due creations settled first. */
export function engineStats(engine: SimulatorEngine): SimulatorStats {
  engine.settle();
  return {
    creations: engine.creations.size,
    inFlight: engine.creations.inFlight,
    idempotencyEntries: engine.idempotency.size,
    ledgerEntries: engine.charges.entries().length,
    polls: engine.polls.answered,
    pollsTooSoon: engine.polls.tooSoon,
  };
}

/** The API port's request handler, and what it holds between requests (slow answers not yet written). */
export interface Router {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Drops every slow answer not yet written. */
  cancelPending(): void;
}

/** Routes the API (`/api/public/v1/...`) and the simulator's own endpoints (`/_sim/...`) to the engine. */
export function createRouter(engine: SimulatorEngine, maxBodyBytes: number): Router {
  const timers = new Set<NodeJS.Timeout>();

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
      const read = await readBody(req, maxBodyBytes);
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
      const latency = engine.config.pollLatencyMs ?? 0;
      const delivery: Delivery = latency > 0 ? { kind: 'slow', delayMs: latency } : { kind: 'send' };
      return deliver(res, { response: engine.poll(principal, id), delivery }, false);
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
      return writeJson(res, { status: 200, body: engine.charges.snapshot() });
    }
    if (path === '/_sim/state' && req.method === 'GET') {
      return writeJson(res, { status: 200, body: { ...engineStats(engine), scripts: engine.faults.pendingScripts() } });
    }
    if (path === '/_sim/control' && req.method === 'POST') {
      const read = await readBody(req, maxBodyBytes);
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

  return {
    handle,
    cancelPending: () => {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
