import { afterEach, describe, expect, it } from 'vitest';
import { ImageApiClient } from '../../src/api/client';
import { ErrorCode } from '../../src/api/contract';
import { HoldRegistry } from '../../src/api/holds';
import { defaultServiceConfig } from '../../src/config/service-config';
import { poll } from './helpers/poll';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from './helpers/stub-server';

/**
 * Issue #42, point 6: what a poll's answer says of the next poll of its creation. A Retry-After on an answer still in
 * flight is kept (the creation is held until then); a 429 for polling too soon raises the interval learnt, also when
 * the poll before it was another worker's.
 */

const servers: StubServer[] = [];
const clients: ImageApiClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(reply: (req: { method: string; url: string }, i: number) => StubReply, holds?: HoldRegistry) {
  const server = await startStub(reply);
  servers.push(server);
  const clock = { t: 1_000_000 };
  const client = new ImageApiClient({
    config: defaultServiceConfig({ baseUrl: server.url }),
    apiKey: () => SECRET_KEY,
    now: () => clock.t,
    ...(holds ? { holds } : {}),
  });
  clients.push(client);
  return { server, client, clock };
}

const running = (retryAfter?: string): StubReply => ({
  status: 200,
  ...(retryAfter === undefined ? {} : { headers: { 'retry-after': retryAfter } }),
  body: { id: 'c1', status: 'running' },
});
const tooSoon = (retryAfter: string, details: Record<string, unknown> = {}): StubReply => ({
  status: 429,
  headers: { 'retry-after': retryAfter },
  body: { error: { code: ErrorCode.RateLimit, message: 'polled too recently', details } },
});

describe('a Retry-After on an answer in flight', () => {
  it('is read as the earliest next poll; an answer without one, or one that ended, has none', () => {
    const at = { headers: { 'retry-after': '3' } };
    expect(poll({ id: 'c', status: 'running' }, at)).toEqual({
      kind: 'inFlight',
      status: 'running',
      retryAfterMs: 3000,
    });
    expect(poll({ id: 'c', status: 'running' })).toEqual({ kind: 'inFlight', status: 'running' });
    expect(poll({ id: 'c', status: 'succeeded', images: ['https://cdn/a.png'] }, at)).toMatchObject({ kind: 'ended' });
  });

  it('holds the creation in this process until then; its other creations are polled', async () => {
    const { server, client, clock } = await setup(() => running('3'));
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'inFlight', retryAfterMs: 3000 });
    clock.t += 2_000; // the configured interval (2 s) has passed, the hint (3 s) has not
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'rateLimited', local: true, retryAfterMs: 1000 });
    expect(await client.getCreation('c2')).toMatchObject({ kind: 'inFlight' });
    clock.t += 1_000;
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'inFlight' });
    expect(server.requests.map((r) => r.url.split('/').pop())).toEqual(['c1', 'c2', 'c1']);
  });
});

describe('a 429 on a poll', () => {
  it('raises the interval when the poll before it was sent by another process (another worker, a restart)', async () => {
    // This process never polled c1: its previous poll was at least the configured 2 s earlier.
    const { client } = await setup(() => tooSoon('1', { scope: 'creation', reason: 'min_poll_interval' }));
    expect(await client.getCreation('c1')).toMatchObject({ kind: 'rateLimited', httpStatus: 429, retryAfterMs: 1000 });
    expect(client.pollIntervalMs()).toBe(3000);
  });

  it('raises it from the poll this process sent before, as before', async () => {
    const { client, clock } = await setup((_r, i) => (i === 0 ? running() : tooSoon('2')));
    await client.getCreation('c1');
    clock.t += 2_500;
    await client.getCreation('c1');
    expect(client.pollIntervalMs()).toBe(4500);
  });

  it('that names another limit (the key, the account) leaves the interval as it is', async () => {
    const holds = new HoldRegistry();
    const { client } = await setup((_r, i) => tooSoon('5', { scope: i === 0 ? 'key' : 'account' }), holds);
    await client.getCreation('c1');
    await client.getCreation('c2');
    expect(client.pollIntervalMs()).toBe(2000);
    expect(holds.creationHoldLeft('c1', 1_000_000)).toBe(5000);
  });
});
