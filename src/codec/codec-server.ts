import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { CODEC_TOKEN_ENV } from '../config/codec-config';
import { ConfigError } from '../config/service-config';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { PayloadCodecError } from './errors';

/**
 * A codec server for the Temporal Web UI and CLI (`POST /encode`, `POST /decode`, payloads as proto JSON: base64
 * metadata values and data), so that a person with the key can read encrypted histories in the browser.
 *
 * Any web page the developer opens can make the browser send requests to 127.0.0.1, and a page whose name is
 * rebound to 127.0.0.1 (DNS rebinding) can read the answers. So the server:
 * - answers only requests whose `Host` is its own address: `localhost`, `127.0.0.1` or `[::1]` with its port (and
 *   the address it listens on); a rebound page's requests carry the page's name, and get 403;
 * - decrypts (and encrypts) only with its token, 401 otherwise. The Temporal Web UI can send no header of the
 *   user's choosing: its codec settings are the endpoint URL, "pass the user access token" (the UI's own OIDC
 *   login token, and to https endpoints only) and "include cross-origin credentials" (cookies). So the token goes
 *   in the endpoint's path, `http://127.0.0.1:8888/<token>`, to which the UI appends `/decode`; a client that can
 *   set headers (the temporal CLI's `--codec-auth`) may send `Authorization: Bearer <token>` instead. A CORS
 *   preflight, which a browser sends without credentials, is answered without the token;
 * - answers CORS requests only from the http(s) origins it is given.
 */

/** Fewest characters of a token. */
export const CODEC_TOKEN_MIN_LENGTH = 32;
/** A token goes in a URL path and a header unescaped: URL-unreserved characters only. */
const TOKEN_SHAPE = /^[A-Za-z0-9._~-]+$/;
const MAX_TOKEN_LENGTH = 512;

/** Why `token` cannot be the codec server's token, or undefined when it can. Never repeats the value. */
export function codecTokenProblem(token: string): string | undefined {
  if (token.length < CODEC_TOKEN_MIN_LENGTH) {
    return `the codec server token must be at least ${CODEC_TOKEN_MIN_LENGTH} characters (it has ${token.length})`;
  }
  if (token.length > MAX_TOKEN_LENGTH) return `the codec server token must be at most ${MAX_TOKEN_LENGTH} characters`;
  if (!TOKEN_SHAPE.test(token)) {
    return 'the codec server token may hold only letters, digits and - . _ ~ (it goes in a URL path)';
  }
  return undefined;
}

/** A new random token: 256 bits, base64url (43 characters). */
export function newCodecToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The codec server's token from {@link CODEC_TOKEN_ENV}, or a new one (`generated`) when it is unset or empty.
 * Throws a ConfigError, naming the variable but not its value, when the value is too short or not URL-safe.
 */
export function codecTokenFromEnv(env: NodeJS.ProcessEnv): { token: string; generated: boolean } {
  const value = env[CODEC_TOKEN_ENV];
  if (value === undefined || value === '') return { token: newCodecToken(), generated: true };
  const problem = codecTokenProblem(value);
  if (problem) throw new ConfigError(CODEC_TOKEN_ENV, problem);
  return { token: value, generated: false };
}

/**
 * `value` as a browser's `Origin`: an http(s) scheme, host and optional port, nothing else (a trailing `/` is
 * dropped). Throws on `null`, `*`, a path, a query, credentials or another scheme.
 */
export function parseAllowedOrigin(value: string): string {
  const refuse = (why: string): never => {
    throw new Error(`${JSON.stringify(value)} is not an http(s) origin (scheme://host[:port]): ${why}`);
  };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refuse('not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') refuse(`the scheme is ${url.protocol.slice(0, -1)}`);
  if (url.username || url.password) refuse('it holds credentials');
  if (url.pathname !== '/' || url.search || url.hash || /[?#]/.test(value)) refuse('it has a path or query');
  if (!/^https?:\/\/[^/]/i.test(value) || /^https?:\/\/[^/]*\/./i.test(value)) refuse('it has a path');
  return url.origin;
}

/** Options of {@link startCodecServer}. */
export interface CodecServerOptions {
  /** The codec that encodes and decodes. */
  codec: PayloadCodec;
  /**
   * Port to listen on (0: any free port).
   * @default 8888
   */
  port?: number;
  /**
   * Address to listen on. Anything but loopback lets others decrypt.
   * @default '127.0.0.1'
   */
  host?: string;
  /**
   * Origins whose browsers may call it (the Web UI's address): http(s) origins only (see {@link parseAllowedOrigin}).
   * @default ['http://localhost:8233', 'http://127.0.0.1:8233'] (the dev server's UI)
   */
  allowOrigins?: readonly string[];
  /**
   * The token every `/encode` and `/decode` request must carry, as the first path segment
   * (`/<token>/decode`) or as `Authorization: Bearer <token>`: at least 32 URL-safe characters.
   */
  token: string;
  /**
   * Largest request body.
   * @default 8 MiB
   */
  maxBodyBytes?: number;
}

export interface CodecServer {
  /** `http://host:port` */
  url: string;
  /** `url` with the token as its path: the endpoint to give the Web UI. Holds the secret: print it once. */
  endpoint: string;
  close(): Promise<void>;
}

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

/** A request the codec server refuses; `status` and `answerCode` are its HTTP status and JSON `error.code`. */
class RequestError extends ImagebatchError {
  readonly code = ErrorCode.CodecRequestInvalid;
  constructor(
    readonly status: number,
    readonly answerCode: string,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the codec server and resolves once it listens. */
export async function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  const allowOrigins = new Set(
    (options.allowOrigins ?? ['http://localhost:8233', 'http://127.0.0.1:8233']).map(parseAllowedOrigin),
  );
  const tokenProblem = codecTokenProblem(options.token);
  if (tokenProblem) throw new Error(tokenProblem);
  const tokenDigest = digest(options.token);
  const maxBodyBytes = options.maxBodyBytes ?? 8 * 1024 * 1024;
  const bindHost = options.host ?? '127.0.0.1';
  /** `host:port` values (lower case) a request may name; filled in once the port is known. */
  const hosts = new Set<string>();
  const server = createServer((req, res) => {
    const origin = req.headers.origin;
    if (origin !== undefined && allowOrigins.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', 'Content-Type, X-Namespace, Authorization');
      res.setHeader('Vary', 'Origin');
    }
    const context: RequestContext = { codec: options.codec, max: maxBodyBytes, hosts, tokenDigest };
    handle(req, res, context).catch((err: unknown) => {
      const known = err instanceof RequestError || err instanceof PayloadCodecError;
      const status = err instanceof RequestError ? err.status : known ? 400 : 500;
      const code = err instanceof RequestError ? err.answerCode : known ? err.code : 'INTERNAL';
      const message = known ? err.message : 'internal error';
      if (err instanceof RequestError && status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
      if (!res.headersSent) writeJson(res, status, { error: { code, message } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8888, bindHost, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const named = (h: string) => (isIP(h) === 6 ? `[${h}]` : h).toLowerCase();
  for (const name of ['localhost', '127.0.0.1', '[::1]', named(bindHost), named(address)]) hosts.add(`${name}:${port}`);
  const url = `http://${named(address)}:${port}`;
  return {
    url,
    endpoint: `${url}/${options.token}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface RequestContext {
  codec: PayloadCodec;
  max: number;
  hosts: ReadonlySet<string>;
  tokenDigest: Buffer;
}

/** `/encode`, `/decode`, or either under one path segment (the token). */
const ROUTE = /^(?:\/([^/]+))?\/(encode|decode)$/;

async function handle(req: IncomingMessage, res: ServerResponse, context: RequestContext): Promise<void> {
  // Before anything else: a request that names another host comes from a page rebound to this address.
  if (!context.hosts.has(hostWithPort(req.headers.host))) {
    throw new RequestError(403, 'FORBIDDEN_HOST', 'the Host header is not this server (localhost with its port)');
  }
  const match = ROUTE.exec((req.url ?? '').split('?')[0] ?? '');
  if (!match) throw new RequestError(404, 'NOT_FOUND', 'POST /<token>/encode or /<token>/decode');
  // A browser sends the preflight without credentials; it decides nothing but whether the POST may be sent.
  if (req.method === 'OPTIONS') {
    res.writeHead(204).end();
    return;
  }
  if (!authorized(req, match[1], context.tokenDigest)) {
    throw new RequestError(401, 'UNAUTHORIZED', 'the token is missing or wrong: use the endpoint the server printed');
  }
  if (req.method !== 'POST') throw new RequestError(405, 'METHOD_NOT_ALLOWED', 'POST only');
  const body = await readBody(req, context.max);
  const payloads = parsePayloads(body);
  const { codec } = context;
  const result = match[2] === 'encode' ? await codec.encode(payloads) : await codec.decode(payloads);
  writeJson(res, 200, { payloads: result.map(toJson) });
}

/** The Host header in lower case, with `:80` when it names no port (as a browser writes it for port 80). */
function hostWithPort(host: string | undefined): string {
  const h = (host ?? '').trim().toLowerCase();
  return /:\d+$/.test(h) ? h : `${h}:80`;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** The token as the path's first segment or as `Authorization: Bearer`, compared in constant time. */
function authorized(req: IncomingMessage, pathToken: string | undefined, expected: Buffer): boolean {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
  let segment: string | undefined;
  try {
    segment = pathToken === undefined ? undefined : decodeURIComponent(pathToken);
  } catch {
    segment = undefined;
  }
  return [segment, bearer].some((t) => t !== undefined && timingSafeEqual(digest(t), expected));
}

function parsePayloads(body: string): Payload[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new RequestError(400, 'BAD_REQUEST', 'the body is not JSON');
  }
  const list = (parsed as { payloads?: unknown } | null)?.payloads;
  if (!Array.isArray(list)) throw new RequestError(400, 'BAD_REQUEST', 'expected {"payloads": [...]}');
  return list.map((item: unknown, i) => {
    const p = item as JsonPayload | null;
    const metadata = p?.metadata ?? {};
    if (typeof metadata !== 'object' || Object.values(metadata).some((v) => typeof v !== 'string')) {
      throw new RequestError(400, 'BAD_REQUEST', `payloads[${i}].metadata must map names to base64 strings`);
    }
    if (p?.data !== undefined && typeof p.data !== 'string') {
      throw new RequestError(400, 'BAD_REQUEST', `payloads[${i}].data must be a base64 string`);
    }
    return {
      metadata: Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
      data: Buffer.from(p?.data ?? '', 'base64'),
    };
  });
}

function toJson(p: Payload): JsonPayload {
  return {
    metadata: Object.fromEntries(
      Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? new Uint8Array(0)).toString('base64')]),
    ),
    data: Buffer.from(p.data ?? new Uint8Array(0)).toString('base64'),
  };
}

async function readBody(req: IncomingMessage, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > max) throw new RequestError(413, 'TOO_LARGE', `the body is larger than ${max} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function writeJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
