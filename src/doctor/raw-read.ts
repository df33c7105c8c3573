import type { Dispatcher } from 'undici';
import { headerOf } from '../api/classify';
import { send } from '../api/http';
import { retryAfterOr } from '../api/retry-after';
import { redactRawText } from '../api/redact';
import { parseJson } from '../api/schemas';
import { AuthHeaderStyle, type ServiceConfig } from '../api/service-config';

/**
 * One free GET of the service, read raw (its JSON, the key redacted from the text first): what doctor shows the
 * shape of, and guesses settings from, when the client's reading of it (which applies the settings) finds nothing.
 */
export async function rawGet(
  req: { config: ServiceConfig; dispatcher: Dispatcher; key: string; now: () => number; signal?: AbortSignal },
  path: string,
): Promise<RawRead> {
  const { config, key } = req;
  const auth: Record<string, string> =
    config.authHeader === AuthHeaderStyle.XApiKey ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
  const res = await send({
    dispatcher: req.dispatcher,
    url: `${config.baseUrl}${path}`,
    method: 'GET',
    headers: { accept: 'application/json', 'user-agent': 'imagebatch', ...auth },
    ...(req.signal ? { signal: req.signal } : {}),
    headersTimeoutMs: config.headersTimeoutMs,
    bodyTimeoutMs: config.bodyTimeoutMs,
    maxBytes: config.maxResponseBytes,
  });
  const ok = res.status !== undefined && res.status >= 200 && res.status < 300 && res.body !== undefined;
  // A 429 or 503 says when to read again.
  const wait = res.status === 429 || res.status === 503;
  const retryAfter = wait
    ? retryAfterOr(headerOf(res.headers, 'retry-after'), req.now(), config.defaultRetryAfterMs)
    : 0;
  return {
    ...(res.status === undefined ? {} : { status: res.status }),
    json: ok ? parseJson(redactRawText(res.body, key)) : undefined,
    ...(wait ? { retryAfterMs: retryAfter } : {}),
  };
}

/** A raw read: its status (none when no answer came), its JSON, and a 429's or 503's wait. */
export interface RawRead {
  status?: number;
  json: unknown;
  retryAfterMs?: number;
}
