import path from 'node:path';
import {
  defaultFailureConverter,
  defaultPayloadConverter,
  type DataConverter,
  type LoadedDataConverter,
  type PayloadCodec,
} from '@temporalio/common';
import { loadPayloadKeys } from '../config/codec-config';
import type { Env } from '../config/env';
import { loadPayloadCompression } from '../config/compression-config';
import { AesGcmPayloadCodec } from './aes-gcm-codec';
import { CompressionPayloadCodec } from './compression-codec';
import { failureConverter } from './failure-converter';

/**
 * The data converters of workers and clients. Both sides need the same keys: the client encrypts the batch's input
 * and signals and decrypts queries and results; the worker does the rest. Failure texts are encoded too
 * ({@link failureConverter}) when payloads are encrypted, so that nothing a row carries is left in plain text.
 * Payloads are compressed first, then encrypted ({@link codecChain}); every process decodes compressed payloads,
 * whether it compresses its own or not.
 */

/** The payload codecs of a process: compression always (it may only decode), encryption when a key is set. */
export interface PayloadCodecs {
  compression: CompressionPayloadCodec;
  encryption?: AesGcmPayloadCodec;
}

/**
 * The codec the environment configures (`IMAGEBATCH_PAYLOAD_KEY` / `_FILE`), or undefined when none is.
 * @default env: the process's (read by src/config)
 */
export function payloadCodecFromEnv(env?: Env): AesGcmPayloadCodec | undefined {
  const keys = loadPayloadKeys(env);
  return keys ? new AesGcmPayloadCodec(keys.keys) : undefined;
}

/**
 * The codecs the environment configures: `IMAGEBATCH_PAYLOAD_COMPRESSION` and the payload keys.
 * @default env: the process's (read by src/config)
 */
export function payloadCodecsFromEnv(env?: Env): PayloadCodecs {
  const encryption = payloadCodecFromEnv(env);
  return {
    compression: new CompressionPayloadCodec({ compress: loadPayloadCompression(env) }),
    ...(encryption ? { encryption } : {}),
  };
}

/** An AES codec alone (callers before compression): with the default compression in front of it. */
const codecsOf = (codecs: PayloadCodecs | AesGcmPayloadCodec): PayloadCodecs =>
  codecs instanceof AesGcmPayloadCodec ? { compression: new CompressionPayloadCodec(), encryption: codecs } : codecs;

/** The codecs in the order Temporal runs them on encode (decode runs them backwards): compress, then encrypt. */
export function codecChain(codecs: PayloadCodecs | AesGcmPayloadCodec): PayloadCodec[] {
  const { compression, encryption } = codecsOf(codecs);
  return encryption ? [compression, encryption] : [compression];
}

/** One codec that runs a chain as Temporal does (the codec server's). */
export class ChainedPayloadCodec implements PayloadCodec {
  constructor(readonly codecs: readonly PayloadCodec[]) {}

  async encode(payloads: Parameters<PayloadCodec['encode']>[0]): ReturnType<PayloadCodec['encode']> {
    for (const codec of this.codecs) payloads = await codec.encode(payloads);
    return payloads;
  }

  async decode(payloads: Parameters<PayloadCodec['decode']>[0]): ReturnType<PayloadCodec['decode']> {
    for (const codec of [...this.codecs].reverse()) payloads = await codec.decode(payloads);
    return payloads;
  }
}

/**
 * Path of the failure converter module, for the worker (it is loaded by path, in the workflow sandbox as well).
 * Resolves to the built `.js` file; under tsx the `.ts` source is found the same way.
 */
export const failureConverterPath = path.join(__dirname, 'failure-converter');

/** A worker's `dataConverter` with these codecs (a prebuilt workflow bundle must be built with the same path). */
export function workerDataConverter(codecs: PayloadCodecs | AesGcmPayloadCodec): DataConverter {
  const encrypted = codecsOf(codecs).encryption !== undefined;
  return { payloadCodecs: codecChain(codecs), ...(encrypted ? { failureConverterPath } : {}) };
}

/** A client's data converter with these codecs (already loaded: no module is required by path). */
export function clientDataConverter(codecs: PayloadCodecs | AesGcmPayloadCodec): LoadedDataConverter {
  const encrypted = codecsOf(codecs).encryption !== undefined;
  return {
    payloadConverter: defaultPayloadConverter,
    failureConverter: encrypted ? failureConverter : defaultFailureConverter,
    payloadCodecs: codecChain(codecs),
  };
}
