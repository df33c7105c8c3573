/** Why a payload could not be decrypted: stable codes that callers and tests branch on. */
export const PayloadCodecErrorCode = {
  /** Encrypted with a key whose id is not among the configured keys (an old key was dropped too early). */
  UnknownKey: 'PAYLOAD_KEY_UNKNOWN',
  /** The authentication tag does not match: the payload (or its key id) was changed, or the key is wrong. */
  Tampered: 'PAYLOAD_TAMPERED',
  /** Not a payload this codec wrote: no key id, or too short to hold a nonce and a tag. */
  Malformed: 'PAYLOAD_MALFORMED',
} as const;
export type PayloadCodecErrorCode = (typeof PayloadCodecErrorCode)[keyof typeof PayloadCodecErrorCode];

/** A payload that cannot be decrypted. The message names key ids (never keys) and says what to do. */
export class PayloadCodecError extends Error {
  constructor(
    readonly code: PayloadCodecErrorCode,
    message: string,
    /** The key id the payload names, when it names one. */
    readonly keyId?: string,
  ) {
    super(message);
    this.name = 'PayloadCodecError';
  }
}
