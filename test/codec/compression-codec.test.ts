import { randomBytes } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import {
  AesGcmPayloadCodec,
  COMPRESSED_ENCODING,
  COMPRESSION_MIN_BYTES,
  CompressionPayloadCodec,
  ENCRYPTED_ENCODING,
  PayloadCodecError,
  PayloadCodecErrorCode,
  clientDataConverter,
  payloadCodecsFromEnv,
  workerDataConverter,
} from '../../src/codec';
import { PAYLOAD_COMPRESSION_ENV, loadPayloadCompression } from '../../src/config/compression-config';
import { ConfigError } from '../../src/config/service-config';

/**
 * The compression codec: it deflates a payload of at least COMPRESSION_MIN_BYTES when that saves bytes, leaves the
 * others as they are, decodes payloads written before it (plain or encrypted), and runs before the AES codec.
 */

const Proto = temporal.api.common.v1.Payload;
const utf8 = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array(0)).toString('utf8');
const encodingOf = (p: Payload) => utf8(p.metadata?.encoding);
const size = (p: Payload) => Proto.encode(p).finish().length;

/** A JSON payload as Temporal's default converter writes it. */
function json(value: unknown): Payload {
  return { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value)) };
}

/** A row record much like a real one: repetitive JSON, well over the threshold. */
const record = json({
  rowId: 'b000042',
  state: 'succeeded',
  prompt: 'a watercolour harbour at dawn, boats and gulls, number 42',
  keys: Array.from({ length: 3 }, (_, i) => ({
    key: `ib/batch-1/b000042/a${i + 1}`,
    creationId: `cr_01J00000000000000000000${i}`,
    images: [{ url: `http://127.0.0.1:8788/files/cr_${i}-0.png`, width: 1024, height: 1024 }],
  })),
});

/** Encodes through a data converter's codecs as the SDK does: in array order; decodes in the reverse order. */
async function encodeChain(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  for (const codec of codecs) payloads = await codec.encode(payloads);
  return payloads;
}
async function decodeChain(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  for (const codec of [...codecs].reverse()) payloads = await codec.decode(payloads);
  return payloads;
}

describe('CompressionPayloadCodec', () => {
  const codec = new CompressionPayloadCodec();

  it('compresses a payload over the threshold, with its own encoding, and gives it back exactly', async () => {
    expect(size(record)).toBeGreaterThanOrEqual(COMPRESSION_MIN_BYTES);
    const [encoded] = await codec.encode([record]);
    expect(encodingOf(encoded!)).toBe(COMPRESSED_ENCODING);
    expect(size(encoded!)).toBeLessThan(size(record));
    const [decoded] = await codec.decode([encoded!]);
    expect(Proto.encode(decoded!).finish()).toEqual(Proto.encode(record).finish());
  });

  it('leaves a payload under the threshold, and one that compression would not shrink, as they are', async () => {
    const small = json({ rowId: 'b000001' });
    expect(size(small)).toBeLessThan(COMPRESSION_MIN_BYTES);
    const noise: Payload = { metadata: { encoding: Buffer.from('binary/plain') }, data: randomBytes(2000) };
    const [a, b] = await codec.encode([small, noise]);
    expect(a).toBe(small);
    expect(b).toBe(noise);
  });

  it('decodes payloads written before it (plain JSON, binary) unchanged', async () => {
    const old = [json({ rowId: 'b000001', prompt: 'x'.repeat(500) }), record];
    expect(await codec.decode(old)).toEqual(old);
  });

  it('with compression off, writes plain payloads and still reads compressed ones', async () => {
    const off = new CompressionPayloadCodec({ compress: false });
    expect(await off.encode([record])).toEqual([record]);
    const [compressed] = await codec.encode([record]);
    expect(await off.decode([compressed!])).toEqual([Proto.decode(Proto.encode(record).finish())]);
  });

  it('refuses a compressed payload that does not inflate, or inflates past its bound, with PAYLOAD_MALFORMED', async () => {
    const garbage: Payload = { metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) }, data: randomBytes(64) };
    const bomb: Payload = {
      metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) },
      data: deflateSync(Buffer.alloc(64 * 2 ** 20)),
    };
    for (const bad of [garbage, bomb]) {
      const err = await codec.decode([bad]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(PayloadCodecError);
      expect((err as PayloadCodecError).code).toBe(PayloadCodecErrorCode.Malformed);
    }
  });
});

describe('the codec chain of workers and clients', () => {
  const key = randomBytes(32);

  it('compresses before it encrypts, and decodes old encrypted-only payloads too', async () => {
    const env = { IMAGEBATCH_PAYLOAD_KEY: key.toString('base64'), [PAYLOAD_COMPRESSION_ENV]: 'on' };
    const codecs = workerDataConverter(payloadCodecsFromEnv(env)).payloadCodecs ?? [];
    expect(codecs.map((c) => c.constructor.name)).toEqual(['CompressionPayloadCodec', 'AesGcmPayloadCodec']);
    expect(clientDataConverter(payloadCodecsFromEnv(env)).payloadCodecs.map((c) => c.constructor.name)).toEqual([
      'CompressionPayloadCodec',
      'AesGcmPayloadCodec',
    ]);
    const [stored] = await encodeChain(codecs, [record]);
    expect(encodingOf(stored!)).toBe(ENCRYPTED_ENCODING);
    // Under the ciphertext: the compressed payload (encrypting first would leave nothing to compress).
    const [inner] = await new AesGcmPayloadCodec([key]).decode([stored!]);
    expect(encodingOf(inner!)).toBe(COMPRESSED_ENCODING);
    expect(await decodeChain(codecs, [stored!])).toEqual([Proto.decode(Proto.encode(record).finish())]);
    // A history written before compression: encrypted, not compressed.
    const [old] = await new AesGcmPayloadCodec([key]).encode([record]);
    expect(await decodeChain(codecs, [old!])).toEqual([Proto.decode(Proto.encode(record).finish())]);
  });

  it('without a key, workers and clients compress when told to, and keep the default failure converter', async () => {
    const converter = workerDataConverter(payloadCodecsFromEnv({ [PAYLOAD_COMPRESSION_ENV]: 'on' }));
    expect(converter.payloadCodecs?.map((c) => c.constructor.name)).toEqual(['CompressionPayloadCodec']);
    expect(converter.failureConverterPath).toBeUndefined();
    const [stored] = await encodeChain(converter.payloadCodecs ?? [], [record]);
    expect(encodingOf(stored!)).toBe(COMPRESSED_ENCODING);
  });
});

describe(`${PAYLOAD_COMPRESSION_ENV}`, () => {
  it('is off by default, on with "on", and names the variable for a wrong value', async () => {
    expect(loadPayloadCompression({})).toBe(false);
    expect(loadPayloadCompression({ [PAYLOAD_COMPRESSION_ENV]: ' ' })).toBe(false);
    expect(loadPayloadCompression({ [PAYLOAD_COMPRESSION_ENV]: 'OFF' })).toBe(false);
    expect(loadPayloadCompression({ [PAYLOAD_COMPRESSION_ENV]: 'on' })).toBe(true);
    expect(() => loadPayloadCompression({ [PAYLOAD_COMPRESSION_ENV]: 'gzip' })).toThrow(ConfigError);
    expect(() => loadPayloadCompression({ [PAYLOAD_COMPRESSION_ENV]: 'gzip' })).toThrow(PAYLOAD_COMPRESSION_ENV);
    const [plain] = await payloadCodecsFromEnv({}).compression.encode([record]);
    expect(plain).toBe(record);
    // Off, a process still reads what one with compression on wrote.
    const [written] = await payloadCodecsFromEnv({ [PAYLOAD_COMPRESSION_ENV]: 'on' }).compression.encode([record]);
    expect(await payloadCodecsFromEnv({}).compression.decode([written!])).toEqual([
      Proto.decode(Proto.encode(record).finish()),
    ]);
  });
});
