import { deflateSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import type { Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  COMPRESSED_ENCODING,
  CompressionPayloadCodec,
  PayloadCodecError,
  startCodecServer,
  type CodecServer,
} from '../../src/codec';

/**
 * Issue 44, point 6: the payloads of one codec server request inflate to at most
 * 64 MiB together (each alone may be up to 4 MiB), and inflating stops at that bound.
 */

/** COMPRESSION_MAX_TOTAL_INFLATED_BYTES, the documented default (written out: the test stands without the export). */
const CAP = 64 * 2 ** 20;
const Proto = temporal.api.common.v1.Payload;
const token = randomBytes(32).toString('base64url');
let server: CodecServer;

beforeAll(async () => {
  server = await startCodecServer({ codec: new CompressionPayloadCodec(), port: 0, token });
});
afterAll(async () => {
  await server?.close();
});

/** A compressed payload that inflates to about `bytes` bytes (zeros: a few KB on the wire). */
function compressed(bytes: number): Payload {
  const inner = Proto.encode({ metadata: { encoding: Buffer.from('binary/plain') }, data: Buffer.alloc(bytes) });
  return { metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) }, data: deflateSync(inner.finish()) };
}
const toJson = (p: Payload) => ({
  metadata: { encoding: Buffer.from(p.metadata!.encoding!).toString('base64') },
  data: Buffer.from(p.data!).toString('base64'),
});

async function decode(payloads: Payload[]): Promise<{ status: number; body: string }> {
  const res = await fetch(`${server.url}/decode`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ payloads: payloads.map(toJson) }),
  });
  return { status: res.status, body: await res.text() };
}

describe('the codec server bounds what one request inflates to', () => {
  it('refuses a request whose payloads inflate past the bound together, and goes on serving', async () => {
    const each = 4 * 2 ** 20 - 64;
    const count = Math.ceil(CAP / each) + 1;
    const answer = await decode(Array.from({ length: count }, () => compressed(each)));
    expect(answer.status).toBe(400);
    const { error } = JSON.parse(answer.body) as { error: { code: string; message: string } };
    expect(error.code).toBe('PAYLOAD_MALFORMED');
    expect(error.message).toContain(`inflate past ${CAP} bytes in all`);
    const small = await decode([compressed(1000), compressed(1000)]);
    expect(small.status).toBe(200);
    expect((JSON.parse(small.body) as { payloads: unknown[] }).payloads).toHaveLength(2);
  });

  it('stops at the payload that reaches the bound: the ones after it are not inflated', async () => {
    const codec = new CompressionPayloadCodec({ maxTotalInflatedBytes: 3000 });
    expect(await codec.decode([compressed(1000), compressed(1000)])).toHaveLength(2);
    const garbage: Payload = { metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) }, data: randomBytes(64) };
    const err = await codec.decode([compressed(1000), compressed(1000), compressed(1000), garbage]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PayloadCodecError);
    expect((err as Error).message).toContain('inflate past 3000 bytes in all');
  });
});
