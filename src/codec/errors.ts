import { ErrorCode, ImagebatchError } from '../model/errors';

/** Why a payload could not be decrypted: the {@link ErrorCode}s a {@link PayloadCodecError} carries. */
export const PayloadCodecErrorCode = {
  UnknownKey: ErrorCode.PayloadKeyUnknown,
  Tampered: ErrorCode.PayloadTampered,
  Malformed: ErrorCode.PayloadMalformed,
} as const;
export type PayloadCodecErrorCode = (typeof PayloadCodecErrorCode)[keyof typeof PayloadCodecErrorCode];

/** A payload that cannot be decrypted. The message names key ids (never keys) and says what to do. */
export class PayloadCodecError extends ImagebatchError {
  constructor(
    readonly code: PayloadCodecErrorCode,
    message: string,
    /** The key id the payload names, when it names one. */
    readonly keyId?: string,
  ) {
    super(message);
  }
}
