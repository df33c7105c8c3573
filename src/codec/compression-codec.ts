import { deflateSync, inflateSync } from 'node:zlib';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { PayloadCodecError, PayloadCodecErrorCode } from './errors';

/**
 * zlib (deflate) compression of whole payloads, so that a row's record, its input and its activities' results take
 * fewer bytes in Temporal's history and its SQLite file. Like the AES codec, the original payload (metadata
 * included) is proto-encoded and compressed, and its metadata says `encoding: binary/zlib`. In a codec chain it comes
 * before the AES codec: ciphertext does not compress.
 */

/** Metadata `encoding` of a compressed payload. */
export const COMPRESSED_ENCODING = 'binary/zlib';
/** Payloads smaller than this (proto-encoded, in bytes) are left as they are: deflate saves little on them. */
export const COMPRESSION_MIN_BYTES = 256;
/**
 * Most bytes a compressed payload may inflate to: twice Temporal's default limit on one payload (2 MB), so that a
 * payload no worker could have written is refused rather than inflated into memory.
 */
export const COMPRESSION_MAX_INFLATED_BYTES = 4 * 2 ** 20;

const Proto = temporal.api.common.v1.Payload;
const ENCODING_BYTES = Buffer.from(COMPRESSED_ENCODING, 'utf8');

/** Options of {@link CompressionPayloadCodec}. */
export interface CompressionCodecOptions {
  /**
   * Compress payloads on encode. Off, the codec only decodes (payloads others compressed stay readable).
   * @default true (a process's setting is `IMAGEBATCH_PAYLOAD_COMPRESSION`, off by default: src/config)
   */
  compress?: boolean;
  /**
   * Smallest payload (proto-encoded bytes) that is compressed.
   * @default COMPRESSION_MIN_BYTES
   */
  minBytes?: number;
}

/**
 * A {@link PayloadCodec} that deflates a payload of at least `minBytes` when that makes it smaller, and inflates
 * payloads marked {@link COMPRESSED_ENCODING}; every other payload (written before it, or small) passes unchanged.
 */
export class CompressionPayloadCodec implements PayloadCodec {
  readonly compress: boolean;
  readonly minBytes: number;

  constructor(options: CompressionCodecOptions = {}) {
    this.compress = options.compress ?? true;
    this.minBytes = options.minBytes ?? COMPRESSION_MIN_BYTES;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return this.compress ? payloads.map((payload) => this.deflate(payload)) : payloads;
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.inflate(payload));
  }

  private deflate(payload: Payload): Payload {
    const plain = Proto.encode(payload).finish();
    if (plain.length < this.minBytes) return payload;
    const compressed: Payload = { metadata: { encoding: ENCODING_BYTES }, data: deflateSync(plain) };
    return Proto.encode(compressed).finish().length < plain.length ? compressed : payload;
  }

  private inflate(payload: Payload): Payload {
    const encoding = payload.metadata?.encoding;
    if (!encoding || !Buffer.from(encoding).equals(ENCODING_BYTES)) return payload;
    let plain: Buffer;
    try {
      plain = inflateSync(payload.data ?? new Uint8Array(0), { maxOutputLength: COMPRESSION_MAX_INFLATED_BYTES });
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' ? 'inflates past' : 'does not inflate';
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        `a compressed payload (${COMPRESSED_ENCODING}) ${why} (at most ${COMPRESSION_MAX_INFLATED_BYTES} bytes)`,
      );
    }
    try {
      return Proto.decode(plain);
    } catch {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        `a compressed payload (${COMPRESSED_ENCODING}) does not hold a payload`,
      );
    }
  }
}
