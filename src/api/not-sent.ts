/**
 * The one rule for "nothing was sent": which transport errors prove that no byte of a request reached the service.
 * A request that failed this way was never seen, so never charged: the same key may be sent again with no risk, and a
 * key whose every send failed this way holds no money. Anything else without a response (a reset, a timeout, a socket
 * closed after the request was written) stays unknown.
 */

/** Name resolution failed: there was no address to connect to. */
const DNS_CODES: ReadonlySet<string> = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);

/** A socket error that means the connection was never made, when it comes from `connect` (see {@link neverSent}). */
const CONNECT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
]);

/** undici's own connect-phase errors: the socket (and its TLS handshake) did not open within the connect timeout. */
const UNDICI_CONNECT_CODES: ReadonlySet<string> = new Set(['UND_ERR_CONNECT_TIMEOUT']);

/**
 * A TLS handshake that failed: undici writes a request only once the handshake has completed, so these (each only
 * possible during the handshake: the peer's certificate, or a peer that does not speak TLS) sent nothing.
 */
const TLS_HANDSHAKE_CODES: ReadonlySet<string> = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'HOSTNAME_MISMATCH',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

/** How deep the `cause` chain (and an AggregateError's `errors`) is followed: a chain may be long, or a cycle. */
const MAX_DEPTH = 4;

/**
 * Whether `err` (an error thrown by undici's `request` before any response) proves that no byte of the request left:
 * a failed name lookup, a connection refused or unreachable (from `connect`), undici's connect timeout, or a failed
 * TLS handshake, found on the error itself, its `cause` chain, or the errors of an AggregateError (Node tries each
 * address of a name, and reports them all). A socket code from another syscall (`write`, `read`) proves nothing.
 */
export function neverSent(err: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH || typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; syscall?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  if (code !== undefined) {
    if (DNS_CODES.has(code) || UNDICI_CONNECT_CODES.has(code) || TLS_HANDSHAKE_CODES.has(code)) return true;
    // An AggregateError of every address tried carries the code, and no syscall: its errors say it.
    if (CONNECT_CODES.has(code) && e.syscall === 'connect') return true;
  }
  if (Array.isArray(e.errors) && e.errors.length > 0) {
    return (e.errors as unknown[]).every((inner) => neverSent(inner, depth + 1));
  }
  return e.cause !== undefined && neverSent(e.cause, depth + 1);
}
