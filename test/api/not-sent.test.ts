import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { neverSent } from '../../src/api/not-sent';
import { send } from '../../src/api/http';
import { startStub, type StubServer } from './helpers/stub-server';
import { closedPort } from '../helpers/closed-port';

const sysErr = (code: string, syscall: string) => Object.assign(new Error(`${syscall} ${code}`), { code, syscall });

const servers: StubServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('neverSent: which transport errors prove that no byte of a request left', () => {
  it('connect-phase errors: DNS, refused or unreachable at connect, the connect timeout, a TLS handshake', () => {
    for (const err of [
      sysErr('ENOTFOUND', 'getaddrinfo'),
      sysErr('EAI_AGAIN', 'getaddrinfo'),
      sysErr('ECONNREFUSED', 'connect'),
      sysErr('EHOSTUNREACH', 'connect'),
      sysErr('ENETUNREACH', 'connect'),
      Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' }),
      Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }),
      Object.assign(new Error("Hostname/IP does not match certificate's altnames"), {
        code: 'ERR_TLS_CERT_ALTNAME_INVALID',
      }),
    ]) {
      expect([err.message, neverSent(err)]).toEqual([err.message, true]);
    }
  });

  it('found through the cause chain and in an AggregateError of every address tried', () => {
    expect(neverSent(new TypeError('fetch failed', { cause: sysErr('ECONNREFUSED', 'connect') }))).toBe(true);
    const all = Object.assign(
      new AggregateError([sysErr('ECONNREFUSED', 'connect'), sysErr('ENETUNREACH', 'connect')], 'all refused'),
      { code: 'ECONNREFUSED' },
    );
    expect(neverSent(all)).toBe(true);
    // One address reached and reset: something may have left.
    const mixed = new AggregateError([sysErr('ECONNREFUSED', 'connect'), sysErr('ECONNRESET', 'read')], 'mixed');
    expect(neverSent(mixed)).toBe(false);
  });

  it('errors after the request may have been written are not: a reset, a socket closed, a timeout, a write error', () => {
    for (const err of [
      sysErr('ECONNRESET', 'read'),
      sysErr('EPIPE', 'write'),
      // An unreachable host on an open connection: the request may be out already.
      sysErr('EHOSTUNREACH', 'write'),
      sysErr('ETIMEDOUT', 'read'),
      Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
      Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' }),
      Object.assign(new Error('Body Timeout Error'), { code: 'UND_ERR_BODY_TIMEOUT' }),
      new Error('no code at all'),
      'a string',
      undefined,
    ]) {
      expect(neverSent(err)).toBe(false);
    }
  });

  it('a cause chain that points back at itself ends', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    a.cause = a;
    expect(neverSent(a)).toBe(false);
  });

  it("undici's own error for a port where nothing listens is one", async () => {
    const port = await closedPort();
    const err = await request(`http://127.0.0.1:${port}/`).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(neverSent(err)).toBe(true);
  });
});

describe('send: notSent on a result with no response', () => {
  const base = { method: 'POST' as const, headers: {}, body: '{}', headersTimeoutMs: 2000, bodyTimeoutMs: 2000 };

  it('is set for a connection refused', async () => {
    const { Agent } = await import('undici');
    const dispatcher = new Agent();
    try {
      const res = await send({ ...base, dispatcher, url: `http://127.0.0.1:${await closedPort()}/x`, maxBytes: 1000 });
      expect(res).toMatchObject({ error: expect.stringMatching(/ECONNREFUSED/) as unknown, notSent: true });
    } finally {
      await dispatcher.close();
    }
  });

  it('is not set for a reset after the request was read', async () => {
    const server = await startStub(() => ({ reset: true }));
    servers.push(server);
    const { Agent } = await import('undici');
    const dispatcher = new Agent();
    try {
      const res = await send({ ...base, dispatcher, url: `${server.url}/creations`, maxBytes: 1000 });
      expect(res.error).toBeDefined();
      expect(res).not.toHaveProperty('notSent');
    } finally {
      await dispatcher.close();
    }
  });
});
