/**
 * The simulator in a process of its own, so that its CPU time and memory are counted apart from the bench's and
 * the worker's. Started by {@link ./simulator.ts} with `node --import tsx`; takes its settings from the
 * `BENCH_SIM` environment variable and answers the parent over IPC. With `count`, a loopback proxy in front of
 * the API counts every answer by status, the 429s by reason, the catalog requests (GET /models), and the polls of
 * each creation, with those that found it not yet ended: the simulator keeps no such count. Prints nothing; the
 * parent gets everything over IPC.
 */
import { createServer, request, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StatusNaming } from '../../src/api/contract';
import { resolveConfig, startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import type { SimCounters, SimHostReport, SimHostRequest, SimHostResponse } from './sim-protocol';

interface HostSettings {
  sim: SimulatorConfigInput;
  count: boolean;
}

const settings = JSON.parse(process.env.BENCH_SIM ?? '{}') as HostSettings;

const statuses = new Map<number, number>();
const tooManyByReason = new Map<string, number>();
const pollsByCreation = new Map<string, number>();
/** Polls answered 200 with a status that is not an end (queued or running), by creation. */
const runningPollsByCreation = new Map<string, number>();
let posts = 0;
let catalogRequests = 0;
/** The field of a creation record that carries its status, and the statuses that end a creation (any naming). */
const statusField = resolveConfig(settings.sim).records.statusField;
const ENDS: ReadonlySet<unknown> = new Set(Object.values(StatusNaming).flatMap((n) => [n.succeeded, n.failed]));
let firstRequestAt: number | undefined;
let lastRequestAt: number | undefined;
/** Requests since the parent last asked (`since`), for "time to the first new request" measurements. */
const arrivals: number[] = [];

function count(status: number): void {
  statuses.set(status, (statuses.get(status) ?? 0) + 1);
}

async function startProxy(target: string): Promise<{ server: Server; baseUrl: string }> {
  const upstream = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server = createServer((req, res) => {
    const now = Date.now();
    firstRequestAt ??= now;
    lastRequestAt = now;
    arrivals.push(now);
    if (arrivals.length > 200_000) arrivals.splice(0, 100_000); // bounded; only recent arrivals are asked for
    const path = req.url ?? '';
    const poll = req.method === 'GET' ? /\/creations\/([^/?]+)/.exec(path)?.[1] : undefined;
    if (poll) pollsByCreation.set(poll, (pollsByCreation.get(poll) ?? 0) + 1);
    if (req.method === 'POST') posts++;
    if (req.method === 'GET' && /\/models\/?(?:\?|$)/.test(path)) catalogRequests++;
    const forward = request(
      {
        agent,
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        const status = answer.statusCode ?? 0;
        count(status);
        res.writeHead(status, answer.headers);
        if (status === 429) {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            const reason = /"reason":"([^"]*)"/.exec(Buffer.concat(chunks).toString('utf8'))?.[1] ?? 'unknown';
            tooManyByReason.set(reason, (tooManyByReason.get(reason) ?? 0) + 1);
          });
        } else if (status === 200 && poll) {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            if (!ENDS.has(statusOf(Buffer.concat(chunks))))
              runningPollsByCreation.set(poll, (runningPollsByCreation.get(poll) ?? 0) + 1);
          });
        }
        answer.pipe(res);
      },
    );
    forward.on('error', () => {
      count(0); // the simulator reset the connection (a reset after commit): the client sees a reset too
      res.destroy();
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, baseUrl: `http://127.0.0.1:${port}${upstream.pathname}` };
}

/** The status of a creation record's body, or undefined if it is not one. */
function statusOf(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString('utf8')) as Record<string, unknown> | null)?.[statusField];
  } catch {
    return undefined;
  }
}

/** Everything the benchmarks read off the simulator: the wire counts, polls per creation, the charge book. */
function report(sim: Simulator, minPollIntervalMs: number): SimHostReport {
  sim.settle();
  const byCreation = sim.charges.byCreation();
  const chargedByPrompt = new Map<string, number>();
  let genMsTotal = 0;
  let genCount = 0;
  let reference = 0;
  let polled = 0;
  let pollsTotal = 0;
  let runningPollsTotal = 0;
  for (const c of byCreation) {
    const record = sim.creation(c.creationId) as
      ({ prompt?: string; created_at?: string; updated_at?: string } & Record<string, unknown>) | undefined;
    if (record?.prompt !== undefined && c.netUsd > 0) {
      chargedByPrompt.set(record.prompt, (chargedByPrompt.get(record.prompt) ?? 0) + 1);
    }
    const polls = pollsByCreation.get(c.creationId);
    if (record?.created_at && record.updated_at && ENDS.has(record[statusField])) {
      const g = Date.parse(record.updated_at) - Date.parse(record.created_at);
      genMsTotal += g;
      genCount++;
      if (polls !== undefined) {
        polled++;
        pollsTotal += polls;
        runningPollsTotal += runningPollsByCreation.get(c.creationId) ?? 0;
        reference += Math.ceil(g / Math.max(1, minPollIntervalMs)) + 1;
      }
    }
  }
  let doubleCharges = 0;
  for (const n of chargedByPrompt.values()) doubleCharges += Math.max(0, n - 1);
  const byKey = sim.charges.byKey();
  return {
    statuses: Object.fromEntries(statuses),
    tooManyByReason: Object.fromEntries(tooManyByReason),
    requests: [...statuses.values()].reduce((a, b) => a + b, 0),
    posts,
    catalogRequests,
    runningPolls: [...runningPollsByCreation.values()].reduce((a, b) => a + b, 0),
    firstRequestAt,
    lastRequestAt,
    creations: byCreation.length,
    netChargedCreations: byCreation.filter((c) => c.netUsd > 0).length,
    chargedPrompts: chargedByPrompt.size,
    doubleCharges,
    chargedTwiceByKey: sim.charges.chargedTwice().length,
    charges: byKey.reduce((a, k) => a + k.charges, 0),
    refunds: byKey.reduce((a, k) => a + k.refunds, 0),
    netUsd: byKey.reduce((a, k) => a + k.netUsd, 0),
    meanGenerationMs: genCount ? genMsTotal / genCount : 0,
    polledCreations: polled,
    meanPollsPerCreation: polled ? pollsTotal / polled : 0,
    meanRunningPollsPerCreation: polled ? runningPollsTotal / polled : 0,
    meanReferencePolls: polled ? reference / polled : 0,
    unexpectedErrors: sim.unexpectedErrors().length,
  };
}

async function main(): Promise<void> {
  const sim = await startSimulator(settings.sim);
  const proxy = settings.count ? await startProxy(sim.baseUrl) : undefined;
  const minPollIntervalMs = settings.sim.limits?.minPollIntervalMs ?? 2000;

  const handle = (msg: SimHostRequest): unknown => {
    switch (msg.op) {
      case 'report':
        return report(sim, minPollIntervalMs);
      case 'setFaults':
        sim.setFaults(msg.faults);
        return true;
      case 'setLimits':
        sim.setLimits(msg.limits);
        return true;
      case 'counters':
        return {
          at: Date.now(),
          requests: [...statuses.values()].reduce((a, b) => a + b, 0),
          tooMany: statuses.get(429) ?? 0,
          creationsInFlight: sim.stats().inFlight,
        } satisfies SimCounters;
      case 'firstRequestAfter':
        return arrivals.find((t) => t >= msg.since) ?? null;
      case 'close':
        return (async () => {
          proxy?.server.closeAllConnections();
          await new Promise<void>((resolve) => (proxy ? proxy.server.close(() => resolve()) : resolve()));
          await sim.close();
          return true;
        })();
    }
  };

  process.on('message', (msg: SimHostRequest) => {
    void (async () => {
      let response: SimHostResponse;
      try {
        response = { id: msg.id, ok: true, value: await handle(msg) };
      } catch (err) {
        response = { id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) };
      }
      process.send?.(response);
      if (msg.op === 'close') process.disconnect?.();
    })();
  });
  process.send?.({
    id: 0,
    ok: true,
    value: { baseUrl: proxy?.baseUrl ?? sim.baseUrl, filesUrl: sim.filesUrl },
  } satisfies SimHostResponse);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
