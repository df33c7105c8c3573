import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxyConfigError, startFaultProxy, type FaultProxy } from '../helpers/fault-proxy';
import { waitUntil } from '../integration/helpers';

/**
 * The TCP fault proxy on loopback, between an undici client (as the worker uses) and a small HTTP upstream that
 * counts what reaches it: each fault kind strikes, is counted, and does to the exchange what it says.
 */
const BODY = 'x'.repeat(4000);
let upstream: Server;
let upstreamPort: number;
let hits = 0;
const proxies: FaultProxy[] = [];
const clients: Client[] = [];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => {
      res.writeHead(req.url === '/limited' ? 429 : 200, { 'content-type': 'text/plain' });
      res.end(BODY);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
});

afterEach(async () => {
  for (const c of clients.splice(0)) await c.destroy();
  for (const p of proxies.splice(0)) await p.close();
});

afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

async function proxyWith(faults: Parameters<typeof startFaultProxy>[0]['faults'], seed = 1): Promise<FaultProxy> {
  const proxy = await startFaultProxy({ targetPort: upstreamPort, seed, ...(faults ? { faults } : {}) });
  proxies.push(proxy);
  return proxy;
}

function clientOf(proxy: FaultProxy, timeoutMs = 5000): Client {
  const client = new Client(`http://127.0.0.1:${proxy.port}`, { headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  clients.push(client);
  return client;
}

/** One GET: its status and body, or the error's code. */
async function get(client: Client, path = '/'): Promise<{ status?: number; body?: string; error?: string }> {
  try {
    const res = await client.request({ method: 'GET', path });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    return { error: (err as { code?: string }).code ?? String(err) };
  }
}

describe('the fault proxy', () => {
  it('forwards exchanges intact without faults, over one kept-alive connection, counting statuses', async () => {
    const proxy = await proxyWith(undefined);
    const client = clientOf(proxy);
    const before = hits;
    for (let i = 0; i < 5; i++)
      expect(await get(client, i === 4 ? '/limited' : '/')).toEqual({
        status: i === 4 ? 429 : 200,
        body: BODY,
      });
    expect(hits - before).toBe(5);
    const counts = proxy.counts();
    expect(counts).toMatchObject({ connections: 1, exchanges: 5, statuses: { 200: 4, 429: 1 } });
    expect(counts.injected).toEqual({ reset: 0, stall: 0, cut: 0, latency: 0 });
  });

  it('resets: the client sees ECONNRESET, before the request reaches upstream or once it has answered', async () => {
    const proxy = await proxyWith({ probabilities: { reset: 1 } });
    const before = hits;
    const results = [];
    for (let i = 0; i < 12; i++) results.push(await get(clientOf(proxy)));
    expect(results.every((r) => r.error === 'ECONNRESET')).toBe(true);
    const counts = proxy.counts();
    expect(counts.injected.reset).toBe(12);
    // Both phases happen (seeded), and only the answer-phase resets reached upstream.
    expect(counts.beforeRequest.reset).toBeGreaterThan(0);
    expect(counts.beforeRequest.reset).toBeLessThan(12);
    expect(hits - before).toBe(12 - counts.beforeRequest.reset);
  });

  it('stalls for a while: the answer comes late but intact', async () => {
    const proxy = await proxyWith({ probabilities: { stall: 1 }, stallMs: { minMs: 300, maxMs: 300 } });
    const client = clientOf(proxy);
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      expect(await get(client)).toEqual({ status: 200, body: BODY });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    }
    expect(proxy.counts().injected.stall).toBe(3);
  });

  it('stalls until the client gives up, then closes both sides', async () => {
    const proxy = await proxyWith({ probabilities: { stall: 1 }, stallMs: null, answerPhaseShare: 1 });
    const before = hits;
    expect(await get(clientOf(proxy, 300))).toEqual({ error: 'UND_ERR_HEADERS_TIMEOUT' });
    expect(hits - before).toBe(1);
    expect(proxy.counts().injected.stall).toBe(1);
    await waitUntil('the stalled connection to close', async () => proxy.openConnections() === 0 || undefined, 5000);
  });

  it('cuts answers: the client gets part of the answer and then a closed connection', async () => {
    const proxy = await proxyWith({ probabilities: { cut: 1 } });
    const before = hits;
    const results = [];
    for (let i = 0; i < 8; i++) results.push(await get(clientOf(proxy)));
    for (const r of results) expect(r.error, JSON.stringify(r)).toMatch(/^UND_ERR_SOCKET$|^ECONNRESET$/);
    expect(hits - before).toBe(8);
    expect(proxy.counts().injected.cut).toBe(8);
  });

  it('adds latency without changing the answer', async () => {
    const proxy = await proxyWith({ probabilities: { latency: 1 }, latencyMs: { minMs: 200, maxMs: 250 } });
    const client = clientOf(proxy);
    const t0 = performance.now();
    expect(await get(client)).toEqual({ status: 200, body: BODY });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(proxy.counts().injected.latency).toBe(1);
  });

  it('takes new settings at run time', async () => {
    const proxy = await proxyWith(undefined);
    const client = clientOf(proxy);
    expect(await get(client)).toMatchObject({ status: 200 });
    proxy.setFaults({ probabilities: { reset: 1 }, answerPhaseShare: 1 });
    expect(await get(client)).toEqual({ error: 'ECONNRESET' });
    proxy.setFaults({});
    expect(await get(clientOf(proxy))).toMatchObject({ status: 200 });
    expect(proxy.counts().injected.reset).toBe(1);
    expect(() => proxy.setFaults({ probabilities: { reset: 0.6, cut: 0.6 } })).toThrow(FaultProxyConfigError);
  });

  it('draws the same faults from the same seed', async () => {
    const faults = { probabilities: { reset: 0.2, cut: 0.2, latency: 0.3 }, latencyMs: { minMs: 0, maxMs: 5 } };
    const runs: string[][] = [];
    for (const seed of [42, 42]) {
      const proxy = await proxyWith(faults, seed);
      const seen: string[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await get(clientOf(proxy));
        seen.push(r.error ?? String(r.status));
      }
      runs.push(seen);
      expect(proxy.counts().injected.reset + proxy.counts().injected.cut).toBeGreaterThan(0);
    }
    expect(runs[1]).toEqual(runs[0]);
  });

  it('closes every connection on close(), so that no client waits', async () => {
    const proxy = await proxyWith({ probabilities: { stall: 1 }, stallMs: null });
    const pending = get(clientOf(proxy, 30_000));
    await waitUntil('the request to be in the proxy', async () => proxy.counts().exchanges === 1 || undefined, 5000);
    const t0 = performance.now();
    await proxy.close();
    expect((await pending).error).toBeDefined();
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(proxy.openConnections()).toBe(0);
  });
});
