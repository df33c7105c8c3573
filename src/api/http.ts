import { Agent, Pool, request, type Dispatcher } from 'undici';
import type { ServiceConfig } from './service-config';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { neverSent } from './not-sent';

/**
 * The HTTP layer: pooled dispatchers with deliberate timeouts, and a request that reads at most a given number
 * of bytes within a total deadline. It never follows redirects (undici's `request` does not) and never throws
 * for an HTTP status or anything else the peer does.
 */

/** The total deadline of a request when neither the caller nor the dispatcher sets one. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/**
 * The total deadline of each dispatcher made here. undici's own timeouts are set on the pool (headers, and
 * silence between body chunks) but it has no total one, so the pool's is kept beside it and {@link send} and
 * the download apply it: every caller of a dispatcher made from the configuration gets the configured deadline.
 */
const deadlines = new WeakMap<Dispatcher, number>();

/** One connection pool for the service's origin, with the configured timeouts. */
export function createServiceDispatcher(config: ServiceConfig): Dispatcher {
  const pool = new Pool(new URL(config.baseUrl).origin, {
    connections: config.httpConnections,
    connect: { timeout: config.connectTimeoutMs },
    headersTimeout: config.headersTimeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
  });
  deadlines.set(pool, config.requestTimeoutMs);
  return pool;
}

/** A dispatcher for image downloads (any origin), with the same timeouts. */
export function createDownloadDispatcher(config: ServiceConfig): Dispatcher {
  const agent = new Agent({
    connections: config.httpConnections,
    connect: { timeout: config.connectTimeoutMs },
    headersTimeout: config.headersTimeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
  });
  deadlines.set(agent, config.requestTimeoutMs);
  return agent;
}

/** The total deadline of a dispatcher made by this module, else {@link DEFAULT_REQUEST_TIMEOUT_MS}. */
export function requestTimeoutOf(dispatcher: Dispatcher): number {
  return deadlines.get(dispatcher) ?? DEFAULT_REQUEST_TIMEOUT_MS;
}

/** A request (or a download) that did not end within its total deadline. */
export class RequestTimeoutError extends ImagebatchError {
  readonly code = ErrorCode.RequestTimeout;
  constructor(readonly timeoutMs: number) {
    super(`no complete response within ${timeoutMs} ms (IMAGEGEN_REQUEST_TIMEOUT_MS)`);
  }
}

/** A running total deadline, combined with the caller's signal. */
export interface Deadline {
  /** Aborts when the deadline passes (with a {@link RequestTimeoutError}) or when the caller's signal does. */
  readonly signal: AbortSignal;
  /** True once the deadline itself has passed (not merely the caller's signal). */
  readonly expired: boolean;
  readonly error: RequestTimeoutError;
  /** Releases the timer; call it when the request is over. */
  clear(): void;
}

/**
 * Starts a total deadline. A plain timer rather than `AbortSignal.timeout`, so that it is released as soon as
 * the request ends instead of living for the whole deadline (thousands of requests a minute would otherwise keep
 * thousands of timers).
 */
export function startDeadline(timeoutMs: number, caller?: AbortSignal): Deadline {
  const controller = new AbortController();
  const error = new RequestTimeoutError(timeoutMs);
  const timer = setTimeout(() => controller.abort(error), timeoutMs);
  const signal = caller ? AbortSignal.any([caller, controller.signal]) : controller.signal;
  return {
    signal,
    error,
    get expired() {
      return controller.signal.aborted;
    },
    clear: () => clearTimeout(timer),
  };
}

export interface SendOptions {
  dispatcher: Dispatcher;
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  /** @default no body */
  body?: string;
  /** The caller's cancellation; when it aborts, `send` returns an error and the caller decides. @default none */
  signal?: AbortSignal;
  /** Time allowed until the response headers. */
  headersTimeoutMs: number;
  /** Longest silence between two chunks of the body. */
  bodyTimeoutMs: number;
  /**
   * Total time allowed, from sending to the last byte of the body: the only bound on a body that keeps
   * dripping (see {@link RequestTimeoutError}).
   * @default requestTimeoutOf(dispatcher): the configured `requestTimeoutMs` for dispatchers made here, else 60000
   */
  requestTimeoutMs?: number;
  /** Largest body read; a larger one (declared or actual) is abandoned with an error. */
  maxBytes: number;
}

export type SendResult =
  | { status: number; headers: Record<string, string | string[] | undefined>; body: string; error?: undefined }
  | { status: number; headers: Record<string, string | string[] | undefined>; body?: undefined; error: string }
  | {
      status?: undefined;
      headers?: undefined;
      body?: undefined;
      error: string;
      cause: unknown;
      /** The error proves that no byte of the request left (see `neverSent`): nothing was sent, nothing charged. */
      notSent?: true;
    };

/**
 * Sends one request and reads its body as text, up to `maxBytes`, within the total deadline. Transport errors,
 * the deadline and a body that is too large come back as `error` (with the status when the headers arrived), and
 * `notSent` when the error proves that nothing of the request left (`src/api/not-sent.ts`).
 */
export async function send(options: SendOptions): Promise<SendResult> {
  const deadline = startDeadline(options.requestTimeoutMs ?? requestTimeoutOf(options.dispatcher), options.signal);
  const describe = (err: unknown) => describeError(deadline.expired ? deadline.error : err);
  let res: Dispatcher.ResponseData;
  try {
    res = await request(options.url, {
      dispatcher: options.dispatcher,
      method: options.method,
      headers: options.headers,
      body: options.body,
      signal: deadline.signal,
      headersTimeout: options.headersTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs,
    });
  } catch (err) {
    deadline.clear();
    const cause = deadline.expired ? deadline.error : err;
    return { error: describe(err), cause, ...(neverSent(cause) ? { notSent: true as const } : {}) };
  }
  const headers = res.headers as Record<string, string | string[] | undefined>;
  try {
    const declared = declaredLength(headers);
    if (declared !== undefined && declared > options.maxBytes) {
      abandon(res.body);
      return {
        status: res.statusCode,
        headers,
        error: `response body of ${declared} bytes declared, larger than ${options.maxBytes} bytes`,
      };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > options.maxBytes) {
        abandon(res.body);
        return { status: res.statusCode, headers, error: `response body larger than ${options.maxBytes} bytes` };
      }
      chunks.push(buf);
    }
    return { status: res.statusCode, headers, body: Buffer.concat(chunks).toString('utf8') };
  } catch (err) {
    return { status: res.statusCode, headers, error: describe(err) };
  } finally {
    deadline.clear();
  }
}

/**
 * Stops reading a body and drops its connection. undici's body emits an error when destroyed before its end, and
 * with no listener that error would be uncaught and end the process: one is added first.
 */
export function abandon(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** The Content-Length a response declares, when it is one plain number. */
export function declaredLength(headers: Record<string, string | string[] | undefined>): number | undefined {
  const v = headers['content-length'];
  const text = Array.isArray(v) ? v[0] : v;
  return text !== undefined && /^\s*\d+\s*$/.test(text) ? Number(text) : undefined;
}

/**
 * A one-line description of a transport error: its stable code and message, nothing else (no headers, no
 * request options). Callers still redact it, in case a message ever echoes something it should not.
 */
export function describeError(err: unknown, depth = 0): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === 'string' ? `${code}: ` : err.name && err.name !== 'Error' ? `${err.name}: ` : '';
    // Causes are followed a few levels only: a chain may be long, or even point back at itself.
    const cause = err.cause instanceof Error && depth < 3 ? ` (${describeError(err.cause, depth + 1)})` : '';
    return `${prefix}${err.message}${cause}`.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
