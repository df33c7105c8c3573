/** Payload encryption for Temporal: an AES-256-GCM codec, its errors, and the converters that use it. */
export { AesGcmPayloadCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA, payloadKeyId } from './aes-gcm-codec';
export { PayloadCodecError, PayloadCodecErrorCode } from './errors';
export { clientDataConverter, failureConverterPath, payloadCodecFromEnv, workerDataConverter } from './data-converter';
export {
  CODEC_TOKEN_ENV,
  CODEC_TOKEN_MIN_LENGTH,
  codecTokenFromEnv,
  codecTokenProblem,
  newCodecToken,
  parseAllowedOrigin,
  startCodecServer,
  type CodecServer,
  type CodecServerOptions,
} from './codec-server';
