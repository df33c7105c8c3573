import { MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ImageApiClient, LocalHoldCode, silentLogger } from '../../src/api/client';
import { keyFingerprint } from '../../src/api/api-key';
import { ErrorCode } from '../../src/api/contract';
import { HoldRegistry } from '../../src/api/holds';
import { defaultServiceConfig } from '../../src/config/service-config';
import { type ServiceConfig } from '../../src/api/service-config';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from './helpers/stub-server';

const servers: StubServer[] = [];
const clients: ImageApiClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const request = { prompt: 'a red fox in snow', model: 'flux-dev', width: 512, height: 512 };
const accepted = (id = 'cr_1'): StubReply => ({ status: 202, body: { id, status: 'queued', cost_usd: 0.04 } });

async function setup(
  reply: (req: { method: string; url: string }, i: number) => StubReply,
  overrides: Partial<ServiceConfig> = {},
  extra: {
    apiKey?: () => string;
    holds?: HoldRegistry;
    sleep?: (ms: number) => Promise<void>;
    info?: (message: string) => void;
  } = {},
) {
  const server = await startStub(reply);
  servers.push(server);
  const clock = { t: 1_000_000 };
  const client = new ImageApiClient({
    config: defaultServiceConfig({ baseUrl: server.url, ...overrides }),
    apiKey: extra.apiKey ?? (() => SECRET_KEY),
    now: () => clock.t,
    ...(extra.holds ? { holds: extra.holds } : {}),
    ...(extra.sleep ? { sleep: extra.sleep } : {}),
    ...(extra.info ? { logger: { ...silentLogger, info: extra.info } } : {}),
  });
  clients.push(client);
  return { server, client, clock };
}

describe('ImageApiClient: requests', () => {
  it('sends Authorization: Bearer by default, the idempotency key, and the documented body fields in a fixed order', async () => {
    const { server, client } = await setup(() => accepted());
    const out = await client.submit({
      idempotencyKey: 'b1-r1-1',
      // Fields that are not request fields are dropped, and an `extra` that is not a map of strings is no columns.
      request: {
        height: 512,
        model: 'flux-dev',
        prompt: 'p',
        width: 512,
        unknown: 'dropped',
        extra: 'dropped',
      } as typeof request,
    });
    expect(out).toEqual({ kind: 'accepted', creationId: 'cr_1', status: 'queued', costUsd: 0.04 });
    const [req] = server.requests;
    expect(req?.method).toBe('POST');
    expect(req?.url).toBe('/api/public/v1/creations');
    expect(req?.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
    expect(req?.headers['x-api-key']).toBeUndefined();
    expect(req?.headers['idempotency-key']).toBe('b1-r1-1');
    expect(req?.body).toBe('{"prompt":"p","model":"flux-dev","width":512,"height":512}');
  });

  it('sends X-API-Key (and no Authorization) when configured, and a configured idempotency header', async () => {
    const { server, client } = await setup(() => accepted(), {
      authHeader: 'x-api-key',
      idempotencyHeader: 'X-Request-Key',
    });
    await client.submit({ idempotencyKey: 'k1', request });
    const [req] = server.requests;
    expect(req?.headers['x-api-key']).toBe(SECRET_KEY);
    expect(req?.headers.authorization).toBeUndefined();
    expect(req?.headers['x-request-key']).toBe('k1');
    expect(req?.headers['idempotency-key']).toBeUndefined();
  });

  it('polls GET {base_url}/creations/{id} with the id encoded', async () => {
    const { server, client } = await setup(() => ({ status: 200, body: { id: 'a/b', status: 'running' } }));
    expect(await client.getCreation('a/b')).toEqual({ kind: 'inFlight', status: 'running' });
    expect(server.requests[0]?.url).toBe('/api/public/v1/creations/a%2Fb');
    expect(server.requests[0]?.method).toBe('GET');
  });

  it('a connection reset is ambiguous, and the retry sends the same key and the same bytes', async () => {
    const { server, client } = await setup((_r, i) => (i === 0 ? { reset: true } : accepted('cr_9')));
    const input = { idempotencyKey: 'b1-r7-1', request };
    const first = await client.submit(input);
    expect(first).toMatchObject({ kind: 'ambiguous' });
    expect(first.kind === 'ambiguous' && first.lastError).toMatch(/UND_ERR_SOCKET|ECONNRESET|other side closed/);
    expect(await client.submit(input)).toMatchObject({ kind: 'accepted', creationId: 'cr_9' });
    expect(server.requests.map((r) => r.headers['idempotency-key'])).toEqual(['b1-r7-1', 'b1-r7-1']);
    expect(server.requests[0]?.body).toBe(server.requests[1]?.body);
  });

  it('a connection refused is notSent: no byte of the request left', async () => {
    const { server, client } = await setup(() => accepted());
    await server.close();
    servers.splice(servers.indexOf(server), 1);
    expect(await client.submit({ idempotencyKey: 'k', request })).toMatchObject({
      kind: 'notSent',
      lastError: expect.stringMatching(/ECONNREFUSED/) as unknown,
    });
  });

  it('a response whose headers do not come in time is ambiguous (headers timeout)', async () => {
    const { client } = await setup(() => ({ hang: true }), { headersTimeoutMs: 200 });
    const out = await client.submit({ idempotencyKey: 'k', request });
    expect(out).toMatchObject({ kind: 'ambiguous', lastError: expect.stringMatching(/HEADERS_TIMEOUT/) as unknown });
  });

  it('a body that stops arriving is ambiguous (body timeout)', async () => {
    const { client } = await setup(() => ({ stallBody: true, status: 202 }), { bodyTimeoutMs: 200 });
    const out = await client.submit({ idempotencyKey: 'k', request });
    expect(out).toMatchObject({
      kind: 'ambiguous',
      httpStatus: 202,
      lastError: expect.stringMatching(/BODY_TIMEOUT/) as unknown,
    });
  });

  it('a body larger than the cap is abandoned and ambiguous', async () => {
    const { client } = await setup(() => ({ status: 202, stream: { bytes: 200_000 } }), { maxResponseBytes: 4096 });
    const out = await client.submit({ idempotencyKey: 'k', request });
    expect(out).toMatchObject({
      kind: 'ambiguous',
      lastError: expect.stringMatching(/larger than 4096 bytes/) as unknown,
    });
  });

  it('an invalid idempotency key is a configuration error and sends nothing', async () => {
    const { server, client } = await setup(() => accepted());
    expect(await client.submit({ idempotencyKey: '', request })).toMatchObject({ kind: 'config' });
    expect(await client.submit({ idempotencyKey: 'x'.repeat(256), request })).toMatchObject({ kind: 'config' });
    expect(await client.submit({ idempotencyKey: 'caf\u00e9', request })).toMatchObject({ kind: 'config' });
    expect(server.requests).toHaveLength(0);
  });

  it('works through an injected undici MockAgent', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent
      .get('http://svc.test')
      .intercept({ path: '/api/public/v1/models', method: 'GET', headers: { authorization: `Bearer ${SECRET_KEY}` } })
      .reply(200, { models: [{ id: 'flux-dev', price_usd: 0.04 }] });
    const client = new ImageApiClient({
      config: defaultServiceConfig({ baseUrl: 'http://svc.test/api/public/v1' }),
      apiKey: () => SECRET_KEY,
      dispatcher: agent,
    });
    expect(await client.listModels()).toEqual({ kind: 'models', models: [{ id: 'flux-dev', priceUsd: 0.04 }] });
    await agent.close();
  });
});

describe('ImageApiClient: the API key', () => {
  it.each([
    ['img_live_short', /has 5 characters; 40 expected/],
    ['img_test_' + 'a'.repeat(40), /does not contain "live_"/],
    ['img_live_' + 'a'.repeat(39) + '!', /1 character\(s\) other than A-Z, a-z, 0-9/],
    ['', /is empty/],
  ])('a malformed key (%#) is refused before any request, without being printed', async (key, message) => {
    const { server, client } = await setup(() => accepted(), {}, { apiKey: () => key });
    const out = await client.submit({ idempotencyKey: 'k', request });
    expect(out.kind).toBe('config');
    expect(out.kind === 'config' && out.message).toMatch(message);
    if (key) expect(JSON.stringify(out)).not.toContain(key);
    expect(server.requests).toHaveLength(0);
  });

  it('a provider that throws gives a configuration error without its message', async () => {
    const { client } = await setup(
      () => accepted(),
      {},
      {
        apiKey: () => {
          throw new Error(`boom ${SECRET_KEY}`);
        },
      },
    );
    const out = await client.listModels();
    expect(out).toEqual({ kind: 'config', message: 'the API key is unavailable' });
  });
});

describe('ImageApiClient: holds', () => {
  const limited = (seconds: string): StubReply => ({
    status: 429,
    headers: { 'retry-after': seconds },
    body: { error: { code: ErrorCode.RateLimit, message: 'slow down' } },
  });

  it('a 429 on a submission holds every later request of the key until Retry-After, without sending it', async () => {
    const { server, client, clock } = await setup((r, i) =>
      i === 0 ? limited('5') : r.method === 'POST' ? accepted() : { status: 200, body: { id: 'c', status: 'running' } },
    );
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({
      kind: 'rateLimited',
      retryAfterMs: 5000,
    });
    clock.t += 2000;
    expect(await client.submit({ idempotencyKey: 'k2', request })).toMatchObject({
      kind: 'rateLimited',
      local: true,
      retryAfterMs: 3000,
    });
    expect(await client.getCreation('c')).toMatchObject({ kind: 'rateLimited', local: true, retryAfterMs: 3000 });
    expect(await client.listModels()).toMatchObject({ kind: 'rateLimited', local: true });
    expect(server.requests).toHaveLength(1);
    clock.t += 3000;
    expect(await client.submit({ idempotencyKey: 'k2', request })).toMatchObject({ kind: 'accepted' });
    expect(server.requests).toHaveLength(2);
  });

  it('the hold is shared by clients that share a registry (one per process) and keyed per API key', async () => {
    const holds = new HoldRegistry();
    const a = await setup((_r, i) => (i === 0 ? limited('10') : accepted()), {}, { holds });
    const b = await setup(() => accepted(), {}, { holds });
    await a.client.submit({ idempotencyKey: 'k1', request });
    b.clock.t = a.clock.t;
    expect(await b.client.submit({ idempotencyKey: 'k2', request })).toMatchObject({
      kind: 'rateLimited',
      local: true,
    });
    expect(b.server.requests).toHaveLength(0);
    const otherKey = 'img_live_' + 'Z'.repeat(40);
    const c = await setup(() => accepted(), {}, { holds, apiKey: () => otherKey });
    c.clock.t = a.clock.t;
    expect(await c.client.submit({ idempotencyKey: 'k3', request })).toMatchObject({ kind: 'accepted' });
  });

  it('a 503 with Retry-After on a submission is refunded and holds the key', async () => {
    const { server, client, clock } = await setup((_r, i) =>
      i === 0
        ? {
            status: 503,
            headers: { 'retry-after': '7' },
            body: { error: { code: ErrorCode.ProviderUnavailable, message: 'down' } },
          }
        : accepted(),
    );
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({
      kind: 'refunded',
      details: { retryAfterMs: 7000 },
    });
    clock.t += 6999;
    expect(await client.submit({ idempotencyKey: 'k2', request })).toMatchObject({
      kind: 'rateLimited',
      local: true,
      retryAfterMs: 1,
    });
    clock.t += 1;
    expect(await client.submit({ idempotencyKey: 'k2', request })).toMatchObject({ kind: 'accepted' });
    expect(server.requests).toHaveLength(2);
  });

  it('a 429 on a poll holds only that creation, and raises the poll interval', async () => {
    const { server, client, clock } = await setup((r) =>
      r.url.endsWith('/c1') && server.requests.length === 2
        ? limited('3')
        : r.method === 'POST'
          ? accepted()
          : { status: 200, body: { id: 'x', status: 'running' } },
    );
    expect(client.pollIntervalMs()).toBe(2000);
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'inFlight' });
    clock.t += 2000;
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'rateLimited', retryAfterMs: 3000 });
    expect(client.pollIntervalMs()).toBe(5000); // 2 s since the previous poll + 3 s Retry-After
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'rateLimited', local: true });
    expect(await client.getCreation('c2')).toMatchObject({ kind: 'inFlight' });
    expect(await client.submit({ idempotencyKey: 'k', request })).toMatchObject({ kind: 'accepted' });
    expect(server.requests.map((r) => r.url.split('/').pop())).toEqual(['c1', 'c1', 'c2', 'creations']);
  });

  it('a 429 on a poll long after the previous one (a per-key limit) does not raise the poll interval', async () => {
    const { client, clock } = await setup((_r, i) =>
      i === 0 ? { status: 200, body: { id: 'c', status: 'running' } } : limited('3'),
    );
    await client.getCreation('c1');
    clock.t += 60_000;
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'rateLimited', retryAfterMs: 3000 });
    expect(client.pollIntervalMs()).toBe(2000);
    // Nor does it set a pace (a poll's 429 may be the poll interval's): the key's submissions are not held back.
    expect(client.holds.rateOf(keyFingerprint(SECRET_KEY)).perSecond).toBeUndefined();
  });

  it('the optional pacer sleeps sub-second waits and turns longer ones into a local hold', async () => {
    const slept: number[] = [];
    const fast = await setup(
      () => accepted(),
      { clientRatePerSec: 10, clientRateBurst: 1 },
      {
        sleep: async (ms) => {
          slept.push(ms);
        },
      },
    );
    await fast.client.submit({ idempotencyKey: 'k1', request });
    await fast.client.submit({ idempotencyKey: 'k2', request });
    expect(slept).toEqual([100]);
    expect(fast.server.requests).toHaveLength(2);

    const slow = await setup(() => accepted(), { clientRatePerSec: 1, clientRateBurst: 1 });
    await slow.client.submit({ idempotencyKey: 'k1', request });
    // The burst is spent and the next token is 1000 ms away: too long to sleep in process.
    expect(await slow.client.submit({ idempotencyKey: 'k2', request })).toMatchObject({
      kind: 'rateLimited',
      local: true,
      retryAfterMs: 1000,
    });
    expect(slow.server.requests).toHaveLength(1);
    slow.clock.t += 1000;
    expect(await slow.client.submit({ idempotencyKey: 'k2', request })).toMatchObject({ kind: 'accepted' });
  });
});

describe('ImageApiClient: limits learnt from 429s (issue #32)', () => {
  const quotaFull: StubReply = {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { error: { code: ErrorCode.QuotaExceeded, message: 'quota', details: { scope: 'account' } } },
  };
  const rateLimited: StubReply = {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { error: { code: ErrorCode.RateLimit, message: 'slow down' } },
  };
  const running: StubReply = { status: 200, body: { id: 'c1', status: 'running' } };
  const ended: StubReply = {
    status: 200,
    body: { id: 'c1', status: 'succeeded', images: [{ url: 'https://img.example/1.png' }] },
  };

  it('a quota 429 holds the key’s submissions until Retry-After, and its polls go on', async () => {
    const { server, client, clock } = await setup((r, i) =>
      r.method === 'GET' ? running : i === 1 ? quotaFull : accepted(`c${i}`),
    );
    expect(await client.submit({ idempotencyKey: 'k0', request })).toMatchObject({ kind: 'accepted' });
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({
      kind: 'rateLimited',
      httpStatus: 429,
    });
    clock.t += 500;
    expect(await client.getCreation('c0')).toMatchObject({ kind: 'inFlight' });
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({ kind: 'rateLimited', local: true });
    expect(server.requests.map((r) => r.method)).toEqual(['POST', 'POST', 'GET']);
  });

  it('after a quota 429 a submission waits in process for a poll that finds a creation ended, then goes at once', async () => {
    let c0Polls = 0;
    const { server, client, clock } = await setup((r, i) =>
      r.method === 'GET'
        ? r.url.endsWith('/c1') || ++c0Polls > 1
          ? ended
          : running
        : i === 2
          ? quotaFull
          : accepted(`c${i}`),
    );
    await client.submit({ idempotencyKey: 'k0', request }); // c0 in flight
    await client.submit({ idempotencyKey: 'k1', request }); // c1 in flight
    await client.submit({ idempotencyKey: 'k2', request }); // 429: this process's share is 2
    await client.getCreation('c1'); // ended: one place frees
    clock.t += 1000; // Retry-After has passed
    expect(await client.submit({ idempotencyKey: 'k2', request })).toMatchObject({ kind: 'accepted' });
    // The quota is full again: nothing is sent, the submission waits for a place...
    expect(await client.submit({ idempotencyKey: 'k4', request })).toMatchObject({
      kind: 'rateLimited',
      local: true,
      code: LocalHoldCode.Quota,
    });
    expect(server.requests).toHaveLength(5);
    const waiting = client.submit({ idempotencyKey: 'k4', request });
    await client.getCreation('c0'); // still running
    await client.getCreation('c0'); // ended: its place frees, and the waiting submission goes
    expect(await waiting).toMatchObject({ kind: 'accepted' });
    expect(server.requests.map((r) => `${r.method} ${r.url.split('/').pop()}`)).toEqual([
      'POST creations',
      'POST creations',
      'POST creations',
      'GET c1',
      'POST creations',
      'GET c0',
      'GET c0',
      'POST creations',
    ]);
  });

  it("a quota 429 that answers the worker's own probe above its learnt limit says so (probe), the first does not", async () => {
    const { client, clock } = await setup((r, i) => (i >= 1 ? quotaFull : accepted(`c${i}`)));
    await client.submit({ idempotencyKey: 'k0', request }); // c0 in flight
    const first = await client.submit({ idempotencyKey: 'k1', request });
    expect(first).toMatchObject({ httpStatus: 429 });
    expect(first).not.toHaveProperty('probe');
    clock.t += 1000; // its Retry-After passed, and no end seen: one submission goes, above the limit of 1
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({ httpStatus: 429, probe: true });
  });

  it('with no pace set, a rate 429 paces the key just under what the service let through', async () => {
    const { server, client, clock } = await setup(
      (_r, i) => (i === 20 ? rateLimited : accepted(`c${i}`)),
      {},
      {
        sleep: async (ms) => {
          clock.t += ms;
        },
      },
    );
    for (let i = 0; i < 20; i += 1) {
      await client.submit({ idempotencyKey: `k${i}`, request });
      clock.t += 50; // 20/s
    }
    expect(await client.submit({ idempotencyKey: 'k20', request })).toMatchObject({ httpStatus: 429 });
    clock.t += 1000;
    const sentAt: number[] = [];
    for (let i = 20; i < 80; i += 1) {
      await client.submit({ idempotencyKey: `k${i}`, request });
      sentAt.push(clock.t);
    }
    // After the bucket's first half second, 30 requests at the pace: 0.9 of the 19.5/s the service let through.
    const perSecond = 30 / ((sentAt[59]! - sentAt[29]!) / 1000);
    expect(perSecond).toBeGreaterThan(16);
    expect(perSecond).toBeLessThan(19);
    expect(server.requests).toHaveLength(81);
  });

  it('IMAGEGEN_LEARN_LIMITS=off: no pace and no gate after 429s (only their Retry-After)', async () => {
    const { server, client, clock } = await setup((r, i) => (i === 1 ? quotaFull : accepted(`c${i}`)), {
      learnLimits: false,
    });
    await client.submit({ idempotencyKey: 'k0', request });
    await client.submit({ idempotencyKey: 'k1', request });
    clock.t += 1000;
    expect(await client.submit({ idempotencyKey: 'k1', request })).toMatchObject({ kind: 'accepted' });
    expect(server.requests).toHaveLength(3);
  });

  it('IMAGEGEN_LEARN_LIMITS=off: a rate 429 learns no pace, and the log says none was learnt', async () => {
    const logged: string[] = [];
    const { client } = await setup(
      (_r, i) => (i === 3 ? rateLimited : accepted(`c${i}`)),
      { learnLimits: false },
      { info: (message) => void logged.push(message) },
    );
    for (let i = 0; i < 4; i += 1) await client.submit({ idempotencyKey: `k${i}`, request });
    expect(client.holds.rateOf(keyFingerprint(SECRET_KEY)).perSecond).toBeUndefined();
    expect(logged).not.toContain('image api: pace learnt from a 429');
    expect(logged).toContain('image api: key held');
  });
});
