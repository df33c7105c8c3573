import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AesGcmPayloadCodec,
  CODEC_TOKEN_ENV,
  ENCRYPTED_ENCODING,
  KEY_ID_METADATA,
  PayloadCodecErrorCode,
  startCodecServer,
  type CodecServer,
} from '../../src/codec';
import { PAYLOAD_KEY_ENV } from '../../src/config/codec-config';
import { BIN, baseEnv, cli, describeRun } from '../cli/helpers';
import { ensureDistIsFresh } from '../helpers/dist';

/**
 * The codec server the Temporal Web UI calls: /encode and /decode with proto-JSON payloads, CORS for the allowed
 * origins only, typed errors for payloads it cannot decrypt, and the `imagebatch codec-server` command.
 */

const UI = 'http://localhost:8233';
const key = randomBytes(32);
const codec = new AesGcmPayloadCodec([key]);
const token = randomBytes(32).toString('base64url');
let server: CodecServer;

beforeAll(async () => {
  server = await startCodecServer({ codec, port: 0, allowOrigins: [UI], token });
});
afterAll(async () => {
  await server?.close();
});

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const jsonPayload = (value: unknown) => ({
  metadata: { encoding: b64('json/plain') },
  data: b64(JSON.stringify(value)),
});

interface Answer {
  status: number;
  headers: Headers;
  body: { payloads?: { metadata: Record<string, string>; data: string }[]; error?: { code: string } };
}

async function post(route: string, body: unknown, origin = UI): Promise<Answer> {
  const res = await fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin,
      'x-namespace': 'default',
      authorization: `Bearer ${token}`,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

describe('codec server', () => {
  it('encodes and decodes proto-JSON payloads as the worker would', async () => {
    const original = jsonPayload({ prompt: 'a lighthouse at dusk' });
    const encoded = await post('/encode', { payloads: [original] });
    expect(encoded.status).toBe(200);
    const [enc] = encoded.body.payloads!;
    expect(Buffer.from(enc!.metadata.encoding!, 'base64').toString()).toBe(ENCRYPTED_ENCODING);
    expect(Buffer.from(enc!.metadata[KEY_ID_METADATA]!, 'base64').toString()).toBe(codec.keyId);
    expect(Buffer.from(enc!.data, 'base64').includes(Buffer.from('lighthouse'))).toBe(false);
    // What the server encrypted, the codec itself decrypts, and the other way round.
    const [viaCodec] = await codec.decode([
      {
        metadata: Object.fromEntries(Object.entries(enc!.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
        data: Buffer.from(enc!.data, 'base64'),
      },
    ]);
    expect(Buffer.from(viaCodec!.data!).toString()).toBe(JSON.stringify({ prompt: 'a lighthouse at dusk' }));
    const decoded = await post('/decode', { payloads: [enc] });
    expect(decoded.status).toBe(200);
    expect(decoded.body.payloads).toEqual([original]);
  });

  it('answers CORS for the allowed origin only', async () => {
    const preflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: { origin: UI, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-namespace' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(UI);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/X-Namespace/i);
    const other = await post('/encode', { payloads: [] }, 'http://evil.example');
    expect(other.status).toBe(200); // a browser would still refuse to hand the answer to that page
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses tampered payloads, unknown keys, bad bodies and other routes with stable codes', async () => {
    const [enc] = (await post('/encode', { payloads: [jsonPayload('x')] })).body.payloads!;
    const data = Buffer.from(enc!.data, 'base64');
    data.writeUInt8(data.readUInt8(20) ^ 1, 20);
    const tampered = await post('/decode', { payloads: [{ ...enc, data: data.toString('base64') }] });
    expect(tampered).toMatchObject({ status: 400, body: { error: { code: PayloadCodecErrorCode.Tampered } } });
    const [foreign] = await new AesGcmPayloadCodec([randomBytes(32)]).encode([
      { metadata: {}, data: Buffer.from('y') },
    ]);
    const unknown = await post('/decode', {
      payloads: [
        {
          metadata: Object.fromEntries(
            Object.entries(foreign!.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
          ),
          data: Buffer.from(foreign!.data!).toString('base64'),
        },
      ],
    });
    expect(unknown).toMatchObject({ status: 400, body: { error: { code: PayloadCodecErrorCode.UnknownKey } } });
    expect(await post('/decode', '{not json')).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    expect(await post('/decode', { nope: 1 })).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    expect(await post('/other', { payloads: [] })).toMatchObject({ status: 404 });
  });
});

describe('imagebatch codec-server', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    await ensureDistIsFresh();
  });

  it('needs the payload key and names the variable', async () => {
    const r = await cli(['codec-server', '--port', '0'], { env: baseEnv() });
    expect(r.code, describeRun(['codec-server'], r)).toBe(1);
    expect(r.stderr).toContain(PAYLOAD_KEY_ENV);
  });

  it(`serves with the key and the ${CODEC_TOKEN_ENV} token from the environment and stops on SIGTERM`, async () => {
    const child = spawn(process.execPath, [BIN, 'codec-server', '--port', '0'], {
      env: baseEnv({ [PAYLOAD_KEY_ENV]: key.toString('base64'), [CODEC_TOKEN_ENV]: token }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let out = '';
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no address printed: ${out}`)), 60_000);
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /codec server: (http:\/\/127\.0\.0\.1:\d+) \(key id ([0-9a-f]{8})/.exec(out);
          if (m) {
            clearTimeout(timer);
            expect(m[2]).toBe(codec.keyId);
            resolve(m[1]!);
          }
        });
      });
      const [enc] = await codec.encode([{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('1') }]);
      const res = await fetch(`${url}/${token}/decode`, {
        method: 'POST',
        body: JSON.stringify({
          payloads: [
            {
              metadata: Object.fromEntries(
                Object.entries(enc!.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
              ),
              data: Buffer.from(enc!.data!).toString('base64'),
            },
          ],
        }),
      });
      expect(await res.json()).toEqual({ payloads: [{ metadata: { encoding: b64('json/plain') }, data: b64('1') }] });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      // A token the person set is theirs: the server names the variable, never shows the value.
      expect(err).toContain(`/<the token in ${CODEC_TOKEN_ENV}>`);
      expect(err + out).not.toContain(token);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
