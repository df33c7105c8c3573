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
/**
 * Most bytes all the payloads of one decode call (one codec server request) may inflate to together: 64 MiB, eight
 * times the codec server's largest request body, so that many small bombs cannot add up to gigabytes.
 */
export const COMPRESSION_MAX_TOTAL_INFLATED_BYTES = 64 * 2 ** 20;

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
  /**
   * Most bytes the payloads of one decode call may inflate to together; past it the call is refused.
   * @default COMPRESSION_MAX_TOTAL_INFLATED_BYTES
   */
  maxTotalInflatedBytes?: number;
}

/**
 * A {@link PayloadCodec} that deflates a payload of at least `minBytes` when that makes it smaller, and inflates
 * payloads marked {@link COMPRESSED_ENCODING}; every other payload (written before it, or small) passes unchanged.
 */
export class CompressionPayloadCodec implements PayloadCodec {
  readonly compress: boolean;
  readonly minBytes: number;
  readonly maxTotalInflatedBytes: number;

  constructor(options: CompressionCodecOptions = {}) {
    this.compress = options.compress ?? true;
    this.minBytes = options.minBytes ?? COMPRESSION_MIN_BYTES;
    this.maxTotalInflatedBytes = options.maxTotalInflatedBytes ?? COMPRESSION_MAX_TOTAL_INFLATED_BYTES;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return this.compress ? payloads.map((payload) => this.deflate(payload)) : payloads;
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    // One budget for the whole call: each payload may inflate only to what the ones before it left.
    let left = this.maxTotalInflatedBytes;
    return payloads.map((payload) => {
      const [decoded, inflated] = this.inflate(payload, left);
      left -= inflated;
      return decoded;
    });
  }

  private deflate(payload: Payload): Payload {
    const plain = Proto.encode(payload).finish();
    if (plain.length < this.minBytes) return payload;
    const compressed: Payload = { metadata: { encoding: ENCODING_BYTES }, data: deflateSync(plain) };
    return Proto.encode(compressed).finish().length < plain.length ? compressed : payload;
  }

  /** The payload inflated, and how many bytes it inflated to; never more than `left` bytes are allocated. */
  private inflate(payload: Payload, left: number): [Payload, number] {
    const encoding = payload.metadata?.encoding;
    if (!encoding || !Buffer.from(encoding).equals(ENCODING_BYTES)) return [payload, 0];
    const bound = Math.min(COMPRESSION_MAX_INFLATED_BYTES, left);
    let plain: Buffer;
    try {
      plain = inflateSync(payload.data ?? new Uint8Array(0), { maxOutputLength: Math.max(bound, 1) });
      if (plain.length > bound) throw Object.assign(new Error('too large'), { code: 'ERR_BUFFER_TOO_LARGE' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ERR_BUFFER_TOO_LARGE') {
        throw new PayloadCodecError(
          PayloadCodecErrorCode.Malformed,
          `a compressed payload (${COMPRESSED_ENCODING}) does not inflate`,
        );
      }
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        bound < COMPRESSION_MAX_INFLATED_BYTES
          ? `the compressed payloads (${COMPRESSED_ENCODING}) of one request inflate past ` +
              `${this.maxTotalInflatedBytes} bytes in all: send fewer at a time`
          : `a compressed payload (${COMPRESSED_ENCODING}) inflates past ${COMPRESSION_MAX_INFLATED_BYTES} bytes`,
      );
    }
    try {
      return [Proto.decode(plain), plain.length];
    } catch {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        `a compressed payload (${COMPRESSED_ENCODING}) does not hold a payload`,
      );
    }
  }
}
