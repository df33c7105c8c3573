import { createHash } from 'node:crypto';
import { ErrorCode, ImagebatchError } from '../model/errors';

/**
 * The API key: read from the worker's environment only (by `loadApiKey`, src/config/api-key.ts), checked before the
 * first request, and never printed. Every message here describes what is wrong with the key without quoting any part
 * of it.
 */

export const API_KEY_ENV = 'IMAGEGEN_API_KEY';
export const API_KEY_FILE_ENV = 'IMAGEGEN_API_KEY_FILE';
const TOKEN_LENGTH = 40;
const MARKER = 'live_';

/** Something wrong with the API key or where it comes from; the message never contains the key. */
export class ApiKeyError extends ImagebatchError {
  readonly code = ErrorCode.ApiKeyInvalid;
}

/** A source of the key, called for each request (so a rotated key file can be picked up by a new provider). */
export type ApiKeyProvider = () => string;

/**
 * Checks the `live_` + 40 `[A-Za-z0-9]` tail of a key. Returns the problem in words, or undefined when the
 * format is right. `source` names where the key came from (an environment variable or a file).
 */
export function describeApiKeyProblem(key: string, source = API_KEY_ENV): string | undefined {
  if (key.length === 0) return `${source} is empty`;
  if (/\s/.test(key)) return `the API key from ${source} contains whitespace (${countMatches(key, /\s/g)} characters)`;
  const at = key.lastIndexOf(MARKER);
  if (at < 0) {
    return `the API key from ${source} does not contain "${MARKER}" (expected <prefix>${MARKER}<${TOKEN_LENGTH} letters or digits>, ${key.length} characters given)`;
  }
  const token = key.slice(at + MARKER.length);
  const bad = countMatches(token, /[^A-Za-z0-9]/g);
  if (bad > 0) {
    return `the token after "${MARKER}" in the API key from ${source} has ${bad} character(s) other than A-Z, a-z, 0-9`;
  }
  if (token.length !== TOKEN_LENGTH) {
    return `the token after "${MARKER}" in the API key from ${source} has ${token.length} characters; ${TOKEN_LENGTH} expected`;
  }
  return undefined;
}

/** Throws an {@link ApiKeyError} when the key's format is wrong; returns the key otherwise. */
export function assertApiKeyFormat(key: string, source = API_KEY_ENV): string {
  const problem = describeApiKeyProblem(key, source);
  if (problem) throw new ApiKeyError(problem);
  return key;
}

/** A provider that loads (and checks) the key once, on first use, and then returns it. */
export function lazyApiKeyProvider(load: () => string): ApiKeyProvider {
  let key: string | undefined;
  return () => (key ??= load());
}

/** A short, non-reversible name of a key for per-key state and logs (the first 12 hex digits of its SHA-256). */
export function keyFingerprint(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

function countMatches(s: string, re: RegExp): number {
  return s.match(re)?.length ?? 0;
}
