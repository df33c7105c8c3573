/**
 * The one place that decides whether a configuration value may appear in a message. Every config reader
 * (service, Temporal, Temporal profiles, payload keys, metrics, the API key) describes a wrong value through
 * {@link describeValue}, and names files through {@link unreadableFile}: a message goes to stderr, that is to
 * container logs, and a user who put a secret in the wrong variable must not find it there.
 *
 * - The value of a secret-bearing variable (a key, a token, a PEM, a file path, gRPC metadata) is never shown.
 * - Any other value is quoted, unless it looks like a secret: a `live_` key, a long high-entropy token, padded
 *   base64, a JWT, a PEM block, a URL with `user:pass@` or with a query parameter named like a key or token. Such a
 *   value is replaced by a description, `<a value of 45 characters, not shown>`.
 */

/** Variables and profile fields whose value is secret, or a file path (which may be a secret put there by mistake). */
const SECRET_VARIABLE =
  /key|token|secret|passw|pwd|credential|cert|grpc_meta|(?:^|[._])data$|_data$|(?:^|[._])path$|_path$|(?:^|[._])file$|_file$/i;

/** Whether the value of `variable` (an environment variable or a profile field such as `tls.client_key_path`) is secret. */
export function isSecretVariable(variable: string): boolean {
  return SECRET_VARIABLE.test(variable);
}

const PEM = /-----BEGIN [A-Z0-9 ]*-----|PRIVATE KEY/;
const LIVE_KEY = /live_[A-Za-z0-9]{8,}/i;
const URL_CREDENTIALS = /\/\/[^/?#\s@]+@/;
const SECRET_QUERY = /[?&;#][^=&#\s]*(?:key|token|secret|passw|pwd|sig|auth|credential|session|code)[^=&#\s]*=/i;
const AUTH_SCHEME = /\b(?:bearer|basic|token)\s+\S{8,}/i;
const JWT = /eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}/;
const PADDED_BASE64 = /[A-Za-z0-9+/]{20,}={1,2}(?![A-Za-z0-9+/=])/;
const TOKEN_RUN = /[A-Za-z0-9_+=-]{20,}/g;

/** Bits per character of `s` (Shannon entropy of its character frequencies). */
function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= (n / s.length) * Math.log2(n / s.length);
  return bits;
}

/** A run of 20 or more token characters that mixes letters and digits (or cases) with high entropy. */
function isHighEntropyToken(run: string): boolean {
  const digits = run.match(/\d/g)?.length ?? 0;
  const mixedCase = /[a-z]/.test(run) && /[A-Z]/.test(run);
  const h = entropy(run);
  if (/[A-Za-z]/.test(run) && digits >= 3 && h >= 3.2) return true;
  if (run.length >= 24 && mixedCase && digits >= 1 && h >= 3.5) return true;
  return run.length >= 32 && mixedCase && h >= 4;
}

/** Whether `value` looks like a secret (see the module's description). */
export function looksLikeSecret(value: string): boolean {
  if ([PEM, LIVE_KEY, URL_CREDENTIALS, SECRET_QUERY, AUTH_SCHEME, JWT, PADDED_BASE64].some((re) => re.test(value))) {
    return true;
  }
  return (value.match(TOKEN_RUN) ?? []).some(isHighEntropyToken);
}

/** The description that replaces a value that is not shown. */
export function hiddenValue(value: string): string {
  return `<a value of ${value.length} characters, not shown>`;
}

/**
 * A value for a message about `variable`: quoted when it may be shown, otherwise a description of it. Values that
 * are not strings (from a TOML profile) are described by their JSON text.
 */
export function describeValue(variable: string, value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  return isSecretVariable(variable) || looksLikeSecret(text) ? hiddenValue(text) : JSON.stringify(text);
}

/** ` (got "…")`, or ` (got <a value of … characters, not shown>)`. */
export function gotValue(variable: string, value: unknown): string {
  return ` (got ${describeValue(variable, value)})`;
}

/**
 * `text` (a parser's message) with every copy of `value` replaced by its description, for messages whose wording
 * is not ours and might quote the value.
 */
export function withoutValue(text: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim().length < 4) return text;
  // The whole value, and each of its pieces that looks like a secret (a list's entry, a word).
  const pieces = value.split(/[\s,;]+/).filter((p) => p.length >= 4 && looksLikeSecret(p));
  let out = text;
  for (const v of new Set([value, value.trim(), ...pieces])) out = out.split(v).join(hiddenValue(v));
  return out;
}

/**
 * The problem of a variable (or profile field) that names a file that cannot be read, without the name: it may be
 * the secret itself, put in the wrong variable. When it looks like one, says so and where it belongs (`instead`).
 */
export function unreadableFile(value: string, code: string, instead?: string): string {
  // A path (absolute or relative to a folder) is taken as one; anything else that looks like a key gets a hint.
  const looksSecret = !/^(?:[/~.]|[A-Za-z]:\\)/.test(value) && looksLikeSecret(value);
  const hint = looksSecret
    ? `; the value is not a file name but looks like a key itself (${value.length} characters, not shown)` +
      (instead ? `: put it in ${instead} instead` : '')
    : '';
  return `cannot read the file it names (${code})${hint}`;
}
