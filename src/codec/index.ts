/** Payload compression and encryption for Temporal: the codecs, their errors, and the converters that use them. */
export { AesGcmPayloadCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA, payloadKeyId } from './aes-gcm-codec';
export {
  COMPRESSED_ENCODING,
  COMPRESSION_MAX_INFLATED_BYTES,
  COMPRESSION_MAX_TOTAL_INFLATED_BYTES,
  COMPRESSION_MIN_BYTES,
  CompressionPayloadCodec,
  type CompressionCodecOptions,
} from './compression-codec';
export { PayloadCodecError, PayloadCodecErrorCode } from './errors';
export {
  ChainedPayloadCodec,
  clientDataConverter,
  codecChain,
  failureConverterPath,
  payloadCodecFromEnv,
  payloadCodecsFromEnv,
  workerDataConverter,
  type PayloadCodecs,
} from './data-converter';
export { CODEC_TOKEN_ENV } from '../config/codec-config';
export {
  CODEC_TOKEN_MIN_LENGTH,
  codecTokenFromEnv,
  codecTokenProblem,
  newCodecToken,
  parseAllowedOrigin,
  startCodecServer,
  type CodecServer,
  type CodecServerOptions,
} from './codec-server';
