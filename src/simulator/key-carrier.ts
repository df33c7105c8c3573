import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedBody } from './submit-body';

/**
 * Where the simulator reads a submission's idempotency key (config `idempotency.header` and `idempotency.field`): the
 * interface says only "a header or field". A service reads one of them, or none at all (it does not honour keys).
 * Whatever the service reads, the charge book notes the key the client sent, so that a test can count the creations
 * charged twice under one key even when the service ignored it.
 */

/** Where the service reads the key: a header (case-insensitive), a dotted body path, or neither. */
export interface KeyCarrier {
  /** The header the key is read from; null: no header (the default `Idempotency-Key` is then not read either). */
  header: string | null;
  /** A dotted body path the key is read from instead of any header. */
  field?: string | undefined;
}

/** The key of a submission as the service reads it, and the body it judges. */
export interface ReadKey {
  /** The key the service honours; undefined: none (the submission is judged as new). */
  honoured?: string;
  /** Where it was read, for a field error (`Idempotency-Key`, `meta.idempotency_key`). */
  where: string;
  /** The key the client sent, wherever it put it (the service's place first): what the charge book notes. */
  sent?: string;
  /** The body without the key's field, for validation: the field is the service's own, not a request field. */
  body: ParsedBody;
  /** The key's field holds something other than a string. */
  problem?: string;
}

/** The header clients send the key in when nothing else is set (contract-defaults.md). */
const USUAL_HEADER = 'idempotency-key';

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value at a dotted path, and the body without it (objects on the way copied, never changed in place). */
function takeField(value: unknown, path: readonly string[]): { found: boolean; value?: unknown; rest: unknown } {
  if (!isObject(value) || path.length === 0) return { found: false, rest: value };
  const [head, ...tail] = path as [string, ...string[]];
  if (!Object.hasOwn(value, head)) return { found: false, rest: value };
  if (tail.length === 0) {
    const { [head]: taken, ...rest } = value;
    return { found: true, value: taken, rest };
  }
  const inner = takeField(value[head], tail);
  if (!inner.found) return { found: false, rest: value };
  const innerRest = inner.rest;
  const rest = { ...value };
  if (isObject(innerRest) && Object.keys(innerRest).length === 0) delete rest[head];
  else rest[head] = innerRest;
  return { found: true, value: inner.value, rest };
}

/** Reads the key where `carrier` says; the body the service then validates has no key field in it. */
export function readKey(headers: IncomingHttpHeaders, body: ParsedBody, carrier: KeyCarrier): ReadKey {
  const usual = headerValue(headers, USUAL_HEADER);
  if (carrier.field !== undefined) {
    const taken = body.ok ? takeField(body.value, carrier.field.split('.')) : { found: false, rest: undefined };
    const stripped: ParsedBody = body.ok ? { ok: true, value: taken.rest } : body;
    if (!taken.found) {
      return { where: carrier.field, body: stripped, ...(usual === undefined ? {} : { sent: usual }) };
    }
    if (typeof taken.value !== 'string') {
      return { where: carrier.field, body: stripped, problem: 'must be a string' };
    }
    return { honoured: taken.value, where: carrier.field, sent: taken.value, body: stripped };
  }
  const honoured = carrier.header === null ? undefined : headerValue(headers, carrier.header);
  const sent = honoured ?? usual;
  return {
    where: carrier.header ?? 'Idempotency-Key',
    body,
    ...(honoured === undefined ? {} : { honoured }),
    ...(sent === undefined ? {} : { sent }),
  };
}
