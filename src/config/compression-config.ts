import { ConfigError } from './service-config';
import { onOff } from './setting-schemas';

/** Payload compression (src/codec/compression-codec.ts), from the environment only. */

export const PAYLOAD_COMPRESSION_ENV = 'IMAGEBATCH_PAYLOAD_COMPRESSION';
/**
 * Whether workers and clients compress the payloads they write. Off: measured, it cuts the local SQLite file by 6% a
 * row (BENCHMARKS.md, "Temporal's footprint per row"), and compressed payloads are unreadable in the Web UI and to
 * `temporal workflow show` without `imagebatch codec-server`. Off or on, every process reads compressed payloads.
 */
export const PAYLOAD_COMPRESSION_DEFAULT = false;

/**
 * Reads {@link PAYLOAD_COMPRESSION_ENV}: `on` or `off` (any case).
 * @default PAYLOAD_COMPRESSION_DEFAULT when unset or empty
 */
export function loadPayloadCompression(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  const raw = env[PAYLOAD_COMPRESSION_ENV];
  if (raw === undefined || raw.trim() === '') return PAYLOAD_COMPRESSION_DEFAULT;
  const parsed = onOff.safeParse(raw);
  if (!parsed.success) throw new ConfigError(PAYLOAD_COMPRESSION_ENV, `must be on or off (not ${JSON.stringify(raw)})`);
  return parsed.data;
}
