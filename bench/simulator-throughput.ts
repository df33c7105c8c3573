/**
 * Simulator throughput: one process drives the simulator over HTTP with N concurrent keep-alive
 * connections (a mix of POST /creations and GET /creations/{id}) and prints requests/s and latency.
 * Run: npx tsx bench/simulator-throughput.ts [seconds] [connections]
 */
import { Agent, request } from 'undici';
import { DEMO_API_KEY, startSimulator } from '../src/simulator';

const seconds = Number(process.argv[2] ?? 5);
const connections = Number(process.argv[3] ?? 32);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const sim = await startSimulator({
    limits: { requestsPerSecond: 1e9, burst: 1e9, minPollIntervalMs: 0, accountConcurrency: null },
    generation: { queuedMs: { minMs: 50, maxMs: 100 }, runningMs: { minMs: 200, maxMs: 500 } },
    accounts: [{ id: 'bench', walletUsd: 1e9, keys: [{ id: 'k', key: DEMO_API_KEY }] }],
  });
  const dispatcher = new Agent({ connections, pipelining: 1, keepAliveTimeout: 10_000 });
  const headers = { authorization: `Bearer ${DEMO_API_KEY}`, 'content-type': 'application/json' };
  const latencies: Record<'POST' | 'GET', number[]> = { POST: [], GET: [] };
  const statuses = new Map<number, number>();
  const ids: string[] = [];
  const deadline = performance.now() + seconds * 1000;
  let counter = 0;

  async function worker(w: number): Promise<void> {
    while (performance.now() < deadline) {
      const post = ids.length < 100 || counter % 2 === 0;
      const n = counter++;
      const t0 = performance.now();
      const res = post
        ? await request(`${sim.baseUrl}/creations`, {
            method: 'POST',
            dispatcher,
            headers: { ...headers, 'idempotency-key': `bench-${w}-${n}` },
            body: JSON.stringify({ prompt: `a bench prompt number ${n} with several words`, model: 'flux-schnell' }),
          })
        : await request(`${sim.baseUrl}/creations/${ids[n % ids.length]}`, { dispatcher, headers });
      const body = (await res.body.json()) as { id?: string };
      latencies[post ? 'POST' : 'GET'].push(performance.now() - t0);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      if (post && res.statusCode === 202 && body.id) {
        if (ids.length < 10_000) ids.push(body.id);
        else ids[n % ids.length] = body.id;
      }
    }
  }

  const started = performance.now();
  await Promise.all(Array.from({ length: connections }, (_, w) => worker(w)));
  const elapsed = (performance.now() - started) / 1000;
  const all = [...latencies.POST, ...latencies.GET];
  const rows = (
    [
      ['all', all],
      ['POST /creations', latencies.POST],
      ['GET /creations/{id}', latencies.GET],
    ] as const
  ).map(([name, list]) => {
    const sorted = [...list].sort((a, b) => a - b);
    return {
      requests: name,
      count: list.length,
      'req/s': Math.round(list.length / elapsed),
      'p50 ms': Number(percentile(sorted, 50).toFixed(2)),
      'p99 ms': Number(percentile(sorted, 99).toFixed(2)),
    };
  });
  console.log(`simulator throughput: ${connections} connections, ${elapsed.toFixed(1)} s, Node ${process.version}`);
  console.table(rows);
  console.log('statuses:', Object.fromEntries(statuses), 'state:', sim.stats());
  console.log('charge book consistent:', sim.charges.isConsistent());
  await dispatcher.close();
  await sim.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
