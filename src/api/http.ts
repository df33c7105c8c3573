import { Agent, Pool, request, type Dispatcher } from 'undici';
import type { ServiceConfig } from '../config/service-config';

/**
 * The HTTP layer: pooled dispatchers with deliberate timeouts, and a request that reads at most a given number
 * of bytes. It never follows redirects (undici's `request` does not) and never throws for an HTTP status.
 */

/** One connection pool for the service's origin, with the configured timeouts. */
export function createServiceDispatcher(config: ServiceConfig): Dispatcher {
  return new Pool(new URL(config.baseUrl).origin, {
    connections: config.httpConnections,
    connect: { timeout: config.connectTimeoutMs },
    headersTimeout: config.headersTimeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
  });
}

/** A dispatcher for image downloads (any origin), with the same timeouts. */
export function createDownloadDispatcher(config: ServiceConfig): Dispatcher {
  return new Agent({
    connections: config.httpConnections,
    connect: { timeout: config.connectTimeoutMs },
    headersTimeout: config.headersTimeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
  });
}

export interface SendOptions {
  dispatcher: Dispatcher;
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  maxBytes: number;
}

export type SendResult =
  | { status: number; headers: Record<string, string | string[] | undefined>; body: string; error?: undefined }
  | { status: number; headers: Record<string, string | string[] | undefined>; body?: undefined; error: string }
  | { status?: undefined; headers?: undefined; body?: undefined; error: string; cause: unknown };

/** Sends one request and reads its body as text, up to `maxBytes`. Transport errors come back as `error`. */
export async function send(options: SendOptions): Promise<SendResult> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(options.url, {
      dispatcher: options.dispatcher,
      method: options.method,
      headers: options.headers,
      body: options.body,
      signal: options.signal,
      headersTimeout: options.headersTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs,
    });
  } catch (err) {
    return { error: describeError(err), cause: err };
  }
  const headers = res.headers as Record<string, string | string[] | undefined>;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > options.maxBytes) {
        res.body.destroy();
        return { status: res.statusCode, headers, error: `response body larger than ${options.maxBytes} bytes` };
      }
      chunks.push(buf);
    }
  } catch (err) {
    return { status: res.statusCode, headers, error: describeError(err) };
  }
  return { status: res.statusCode, headers, body: Buffer.concat(chunks).toString('utf8') };
}

/**
 * A one-line description of a transport error: its stable code and message, nothing else (no headers, no
 * request options). Callers still redact it, in case a message ever echoes something it should not.
 */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === 'string' ? `${code}: ` : err.name && err.name !== 'Error' ? `${err.name}: ` : '';
    const cause = err.cause instanceof Error ? ` (${describeError(err.cause)})` : '';
    return `${prefix}${err.message}${cause}`.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
