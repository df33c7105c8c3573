import { DEFAULT_IDEMPOTENCY_HEADER } from './contract';
import type { ServiceConfig } from './service-config';

/** Where a submission carries its idempotency key: a header, or a body field (the interface: "a header or field"). */
export type KeyCarrier = { kind: 'header'; name: string } | { kind: 'field'; path: string };

/** The carrier in force: the body field when one is set, else the header. */
export function keyCarrierOf(config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>): KeyCarrier {
  return config.idempotencyField === undefined
    ? { kind: 'header', name: config.idempotencyHeader }
    : { kind: 'field', path: config.idempotencyField };
}

/** The carrier in words, for messages: `header Idempotency-Key`, `body field metadata.key`. */
export function describeKeyCarrier(config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>): string {
  const carrier = keyCarrierOf(config);
  return carrier.kind === 'header' ? `header ${carrier.name}` : `body field ${carrier.path}`;
}

/** The headers a submission carries its key in: the idempotency header, or none when the key is in the body. */
export function keyHeaders(
  config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>,
  key: string,
): Record<string, string> {
  const carrier = keyCarrierOf(config);
  return carrier.kind === 'header' ? { [carrier.name]: key } : {};
}

/**
 * Where the key travels, for a key's print: undefined in the usual header (`Idempotency-Key`, any case), so prints
 * made before the carrier was a setting are unchanged; else the header's name in lower case, or the body field.
 */
export function keyPlaceOf(config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>): string | undefined {
  const carrier = keyCarrierOf(config);
  if (carrier.kind === 'field') return `body field ${carrier.path}`;
  const name = carrier.name.toLowerCase();
  return name === DEFAULT_IDEMPOTENCY_HEADER.toLowerCase() ? undefined : `header ${name}`;
}
