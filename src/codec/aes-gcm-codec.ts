import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { PayloadCodecError, PayloadCodecErrorCode } from './errors';

/**
 * AES-256-GCM encryption of whole payloads, so that prompts, results and failure texts are ciphertext in
 * Temporal's history and on the wire. The original payload (metadata included, so even its encoding is hidden) is
 * proto-encoded and encrypted with a fresh 96-bit nonce; the result is `nonce | ciphertext | tag`, with metadata
 * `encoding: binary/encrypted` and the key's id. The key id is also the additional authenticated data, so a
 * payload cannot be relabelled to another key.
 */

/** Metadata `encoding` of an encrypted payload (the name Temporal's samples and Web UI codec servers use). */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
/** Metadata field that holds the id of the key a payload was encrypted with. */
export const KEY_ID_METADATA = 'encryption-key-id';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';
const Proto = temporal.api.common.v1.Payload;

/** A key's public name: the first 8 hex digits of its SHA-256 (identifies it in metadata, reveals nothing). */
export function payloadKeyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/**
 * A {@link PayloadCodec} with one or more 32-byte keys: the first encrypts, every one decrypts, so a new key is
 * rolled out by putting it first and keeping the old one after it until no history needs it. Payloads that are
 * not encrypted pass through `decode` unchanged (histories written before encryption was turned on).
 */
export class AesGcmPayloadCodec implements PayloadCodec {
  private readonly keys: ReadonlyMap<string, Buffer>;
  /** The id of the key that encrypts. */
  readonly keyId: string;

  constructor(keys: readonly Uint8Array[]) {
    const first = keys[0];
    if (first === undefined) throw new RangeError('AesGcmPayloadCodec needs at least one key');
    const byId = new Map<string, Buffer>();
    keys.forEach((key, i) => {
      if (key.length !== 32) throw new RangeError(`key ${i + 1} has ${key.length} bytes; AES-256 needs 32`);
      const id = payloadKeyId(key);
      const known = byId.get(id);
      if (known && !known.equals(key)) throw new RangeError(`keys ${i + 1} and an earlier one share the id ${id}`);
      byId.set(id, Buffer.from(key));
    });
    this.keys = byId;
    this.keyId = payloadKeyId(first);
  }

  /** Ids of every configured key, the encrypting one first. */
  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  private encrypt(payload: Payload): Payload {
    const key = this.keys.get(this.keyId)!;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv(ALGORITHM, key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(this.keyId, 'utf8'));
    const plain = Proto.encode(payload).finish();
    const data = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        encoding: Buffer.from(ENCRYPTED_ENCODING, 'utf8'),
        [KEY_ID_METADATA]: Buffer.from(this.keyId, 'utf8'),
      },
      data,
    };
  }

  private decrypt(payload: Payload): Payload {
    const encoding = payload.metadata?.encoding;
    if (!encoding || Buffer.from(encoding).toString('utf8') !== ENCRYPTED_ENCODING) return payload;
    const rawId = payload.metadata?.[KEY_ID_METADATA];
    if (!rawId || rawId.length === 0) {
      throw new PayloadCodecError(PayloadCodecErrorCode.Malformed, `an encrypted payload has no ${KEY_ID_METADATA}`);
    }
    const keyId = Buffer.from(rawId).toString('utf8');
    const key = this.keys.get(keyId);
    if (!key) {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.UnknownKey,
        `a payload is encrypted with key id ${JSON.stringify(keyId)}, which is not among the configured keys ` +
          `(${this.keyIds.join(', ')}): add that key after the current one in IMAGEBATCH_PAYLOAD_KEY`,
        keyId,
      );
    }
    const data = Buffer.from(payload.data ?? new Uint8Array(0));
    if (data.length < NONCE_BYTES + TAG_BYTES) {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        `an encrypted payload of ${data.length} bytes is too short for a nonce and a tag`,
        keyId,
      );
    }
    const decipher = createDecipheriv(ALGORITHM, key, data.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(keyId, 'utf8'));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Tampered,
        `an encrypted payload (key id ${keyId}) fails its authentication tag: it was altered, or the key is wrong`,
        keyId,
      );
    }
    try {
      return Proto.decode(plain);
    } catch {
      throw new PayloadCodecError(
        PayloadCodecErrorCode.Malformed,
        `an encrypted payload (key id ${keyId}) does not hold a payload`,
        keyId,
      );
    }
  }
}
