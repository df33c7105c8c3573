import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AesGcmPayloadCodec, CODEC_TOKEN_ENV, startCodecServer, type CodecServer } from '../../src/codec';
import { PAYLOAD_KEY_ENV } from '../../src/config/codec-config';
import { BIN, baseEnv, cli, describeRun, ensureDistIsFresh } from '../cli/helpers';

/**
 * Who may have the codec server decrypt (issue #16, point 7). A page on any site can make a developer's browser
 * send requests to 127.0.0.1, and with DNS rebinding read the answers: the server answers only requests whose
 * `Host` is its own loopback address, and only with the token it printed at start (in the endpoint's path, which
 * is what the Web UI can send, or as `Authorization: Bearer`). `--allow-origin` takes http(s) origins only.
 */

const UI = 'http://localhost:8233';
const TOKEN = randomBytes(32).toString('base64url');
const key = randomBytes(32);
const aes = new AesGcmPayloadCodec([key]);
const SECRET = 'a lighthouse at dusk, prompt of a private batch';

/** The AES codec, counting what it is asked to decode: a refused request must decrypt nothing. */
let decodeCalls = 0;
const codec: PayloadCodec = {
  encode: (payloads: Payload[]) => aes.encode(payloads),
  decode: (payloads: Payload[]) => {
    decodeCalls += 1;
    return aes.decode(payloads);
  },
};

let server: CodecServer;
let port: number;
let encrypted: { metadata: Record<string, string>; data: string };

beforeAll(async () => {
  server = await startCodecServer({ codec, port: 0, allowOrigins: [UI], token: TOKEN });
  port = Number(new URL(server.url).port);
  const [enc] = await aes.encode([{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(SECRET) }]);
  encrypted = {
    metadata: Object.fromEntries(
      Object.entries(enc!.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
    data: Buffer.from(enc!.data!).toString('base64'),
  };
});
afterAll(async () => {
  await server?.close();
});
beforeEach(() => {
  decodeCalls = 0;
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A raw HTTP request to the server's loopback port, with whatever `Host` a rebound page's browser would send. */
function send(options: {
  path: string;
  method?: string;
  host?: string;
  headers?: Record<string, string>;
  body?: string;
}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: options.path,
        method: options.method ?? 'POST',
        headers: {
          host: options.host ?? `127.0.0.1:${port}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const decodeBody = () => JSON.stringify({ payloads: [encrypted] });
const plaintextOf = (reply: Reply) => {
  const parsed = JSON.parse(reply.text) as { payloads?: { data: string }[] };
  return Buffer.from(parsed.payloads?.[0]?.data ?? '', 'base64').toString('utf8');
};
const bearer = { authorization: `Bearer ${TOKEN}` };

describe('codec server: Host', () => {
  it('refuses, with 403 and without decrypting, a request whose Host is not its own loopback address', async () => {
    for (const host of ['evil.example', `evil.example:${port}`, `localhost:${port + 1}`, `10.0.0.5:${port}`]) {
      for (const path of ['/decode', `/${TOKEN}/decode`]) {
        const r = await send({ path, host, headers: bearer, body: decodeBody() });
        expect(r.status, `${host} ${path}`).toBe(403);
        expect(r.text).not.toContain(Buffer.from(SECRET).toString('base64'));
        expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'FORBIDDEN_HOST' } });
      }
    }
    expect(decodeCalls).toBe(0);
  });

  it('answers the loopback names with its own port', async () => {
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
      const r = await send({ path: '/decode', host, headers: bearer, body: decodeBody() });
      expect(r.status, host).toBe(200);
      expect(plaintextOf(r)).toBe(SECRET);
    }
  });
});

describe('codec server: token', () => {
  it('refuses, with 401 and without decrypting, a request without the token or with another one', async () => {
    const refused = [
      await send({ path: '/decode', body: decodeBody() }),
      await send({ path: '/decode', headers: { authorization: `Bearer ${'x'.repeat(43)}` }, body: decodeBody() }),
      await send({ path: '/decode', headers: { authorization: TOKEN }, body: decodeBody() }),
      await send({ path: `/${'x'.repeat(43)}/decode`, body: decodeBody() }),
      await send({ path: `/${TOKEN.slice(0, -1)}/decode`, body: decodeBody() }),
      await send({ path: '/encode', body: JSON.stringify({ payloads: [] }) }),
    ];
    for (const r of refused) {
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
      expect(r.text).not.toContain(Buffer.from(SECRET).toString('base64'));
    }
    expect(decodeCalls).toBe(0);
  });

  it('decrypts with the token in the endpoint path (what the Web UI sends) or as Authorization: Bearer', async () => {
    const inPath = await send({ path: `/${TOKEN}/decode`, headers: { origin: UI }, body: decodeBody() });
    expect(inPath.status).toBe(200);
    expect(plaintextOf(inPath)).toBe(SECRET);
    expect(inPath.headers['access-control-allow-origin']).toBe(UI);
    const inHeader = await send({ path: '/decode', headers: bearer, body: decodeBody() });
    expect(inHeader.status).toBe(200);
    expect(plaintextOf(inHeader)).toBe(SECRET);
    expect(decodeCalls).toBe(2);
  });

  it('answers the CORS preflight of the allowed origin, which carries no credentials', async () => {
    for (const path of [`/${TOKEN}/decode`, `/${TOKEN}/encode`, '/decode']) {
      const r = await send({
        path,
        method: 'OPTIONS',
        headers: {
          origin: UI,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,x-namespace,authorization',
        },
      });
      expect(r.status, path).toBe(204);
      expect(r.headers['access-control-allow-origin']).toBe(UI);
      expect(r.headers['access-control-allow-methods']).toMatch(/POST/);
      expect(r.headers['access-control-allow-headers']).toMatch(/Authorization/i);
    }
    const rebound = await send({ path: '/decode', method: 'OPTIONS', host: 'evil.example', headers: { origin: UI } });
    expect(rebound.status).toBe(403);
  });

  it('refuses to start with a short token or an origin that is not an http(s) origin', async () => {
    await expect(startCodecServer({ codec, port: 0, token: 'short' })).rejects.toThrow(/32/);
    for (const origin of ['null', '*', 'http://localhost:8233/ui', 'file:///tmp', 'localhost:8233']) {
      await expect(startCodecServer({ codec, port: 0, token: TOKEN, allowOrigins: [origin] })).rejects.toThrow(
        /origin/,
      );
    }
  });
});

describe('imagebatch codec-server: token and --allow-origin', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    await ensureDistIsFresh();
  });
  const keyEnv = () => baseEnv({ [PAYLOAD_KEY_ENV]: key.toString('base64') });

  it('refuses --allow-origin null, *, a path or another scheme as a usage error naming the option', async () => {
    for (const origin of ['null', '*', 'http://localhost:8233/ui', 'file:///tmp/x', 'localhost:8233']) {
      const args = ['codec-server', '--port', '0', '--allow-origin', origin];
      const r = await cli(args, { env: keyEnv(), timeoutMs: 20_000 });
      expect(r.code, describeRun(args, r)).toBe(2);
      expect(r.stderr).toContain('--allow-origin');
      expect(r.stderr).toMatch(/http\(s\) origin/);
      expect(r.stdout).not.toContain('codec server:');
    }
  });

  it(`refuses a ${CODEC_TOKEN_ENV} shorter than 32 characters, naming the variable`, async () => {
    const r = await cli(['codec-server', '--port', '0'], {
      env: { ...keyEnv(), [CODEC_TOKEN_ENV]: 'too-short' },
      timeoutMs: 20_000,
    });
    expect(r.code, describeRun(['codec-server'], r)).toBe(1);
    expect(r.stderr).toContain(CODEC_TOKEN_ENV);
    expect(r.stderr).toContain('32');
    expect(r.stderr).not.toContain('too-short');
  });

  it('prints the endpoint with a new token once, on stderr, and that endpoint decrypts; without it, 401', async () => {
    const child = spawn(
      process.execPath,
      [BIN, 'codec-server', '--port', '0', '--allow-origin', 'http://localhost:8233/'],
      { env: keyEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const endpoint = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no endpoint printed: ${out} ${err}`)), 60_000);
        child.stderr.on('data', (c: Buffer) => {
          err += c.toString();
          const m = /codec endpoint.*: (http:\/\/127\.0\.0\.1:\d+\/([A-Za-z0-9_-]{43}))\n/.exec(err);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
      });
      const token = endpoint.split('/').pop()!;
      const base = endpoint.slice(0, -token.length - 1);
      expect(out).not.toContain(token);
      const body = JSON.stringify({ payloads: [encrypted] });
      const withToken = await fetch(`${endpoint}/decode`, { method: 'POST', body, headers: { origin: UI } });
      expect(withToken.status).toBe(200);
      expect(withToken.headers.get('access-control-allow-origin')).toBe(UI);
      const [p] = ((await withToken.json()) as { payloads: { data: string }[] }).payloads;
      expect(Buffer.from(p!.data, 'base64').toString()).toBe(SECRET);
      const viaHeader = await fetch(`${base}/decode`, {
        method: 'POST',
        body,
        headers: { authorization: `Bearer ${token}` },
      });
      expect(viaHeader.status).toBe(200);
      expect((await fetch(`${base}/decode`, { method: 'POST', body })).status).toBe(401);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(err.split(token).length - 1).toBe(1); // printed once
    } finally {
      child.kill('SIGKILL');
    }
  });
});
