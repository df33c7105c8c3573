import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { FileFingerprint, RequestPrint } from './events';

/**
 * A request's print: SHA-256 of the bytes of its body without the idempotency key, and its fingerprint, SHA-256 of
 * the service's submit address and those bytes. Two rows, batches or files that send the same request to the same
 * service ask the same thing, and are paid once. `keyPlace`, where the key travels when not in the usual header,
 * goes into the body's SHA-256 (not the fingerprint): a key is sent again only where the service saw it first.
 */
export function requestPrint(submitUrl: string, body: string, keyPlace?: string): RequestPrint {
  const sent = createHash('sha256').update(body);
  if (keyPlace !== undefined) sent.update('\n').update(keyPlace);
  return {
    requestSha256: sent.digest('hex'),
    fingerprint: createHash('sha256').update(submitUrl).update('\n').update(body).digest('hex'),
  };
}

/** Size and SHA-256 of a file, read as a stream (a file of millions of rows never sits in memory). */
export async function fileFingerprint(file: string): Promise<FileFingerprint> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    const buf = chunk as Buffer;
    size += buf.length;
    hash.update(buf);
  }
  return { size, sha256: hash.digest('hex') };
}

/** SHA-256 of a value's JSON with object fields sorted at every depth: the same value always gives the same hash. */
export function canonicalSha256(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
