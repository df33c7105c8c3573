import path from 'node:path';
import { defaultPayloadConverter, type DataConverter, type LoadedDataConverter } from '@temporalio/common';
import { loadPayloadKeys } from '../config/codec-config';
import { AesGcmPayloadCodec } from './aes-gcm-codec';
import { failureConverter } from './failure-converter';

/**
 * The data converters of an encrypting worker and client. Both sides need the same keys: the client encrypts the
 * batch's input and signals and decrypts queries and results; the worker does the rest. Failure texts are encoded
 * too ({@link failureConverter}), so that nothing a row carries is left in plain text.
 */

/** The codec the environment configures (`IMAGEBATCH_PAYLOAD_KEY` / `_FILE`), or undefined when none is. */
export function payloadCodecFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): AesGcmPayloadCodec | undefined {
  const keys = loadPayloadKeys(env);
  return keys ? new AesGcmPayloadCodec(keys.keys) : undefined;
}

/**
 * Path of the failure converter module, for the worker (it is loaded by path, in the workflow sandbox as well).
 * Resolves to the built `.js` file; under tsx the `.ts` source is found the same way.
 */
export const failureConverterPath = path.join(__dirname, 'failure-converter');

/** A worker's `dataConverter` with this codec (a prebuilt workflow bundle must be built with the same path). */
export function workerDataConverter(codec: AesGcmPayloadCodec): DataConverter {
  return { payloadCodecs: [codec], failureConverterPath };
}

/** A client's data converter with this codec (already loaded: no module is required by path). */
export function clientDataConverter(codec: AesGcmPayloadCodec): LoadedDataConverter {
  return { payloadConverter: defaultPayloadConverter, failureConverter, payloadCodecs: [codec] };
}
