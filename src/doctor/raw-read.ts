import type { Dispatcher } from 'undici';
import { send } from '../api/http';
import { redactRawText } from '../api/redact';
import { parseJson } from '../api/schemas';
import { AuthHeaderStyle, type ServiceConfig } from '../api/service-config';

/**
 * One free GET of the service, read raw (its JSON, the key redacted from the text first): what doctor shows the
 * shape of, and guesses settings from, when the client's reading of it (which applies the settings) finds nothing.
 */
export async function rawGet(
  req: { config: ServiceConfig; dispatcher: Dispatcher; key: string; signal?: AbortSignal },
  path: string,
): Promise<{ status?: number; json: unknown }> {
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
  return {
    ...(res.status === undefined ? {} : { status: res.status }),
    json: ok ? parseJson(redactRawText(res.body, key)) : undefined,
  };
}
