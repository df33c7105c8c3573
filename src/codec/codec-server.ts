import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { PayloadCodecError } from './errors';

/**
 * A codec server for the Temporal Web UI and CLI (`POST /encode`, `POST /decode`, payloads as proto JSON: base64
 * metadata values and data), so that a person with the key can read encrypted histories in the browser. It
 * decrypts for anyone who can reach it, so it listens on loopback by default and answers CORS requests only from
 * the origins it is given.
 */

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
   * Origins whose browsers may call it (the Web UI's address).
   * @default ['http://localhost:8233', 'http://127.0.0.1:8233'] (the dev server's UI)
   */
  allowOrigins?: readonly string[];
  /**
   * Largest request body.
   * @default 8 MiB
   */
  maxBodyBytes?: number;
}

export interface CodecServer {
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
}

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

class RequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the codec server and resolves once it listens. */
export async function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  const allowOrigins = new Set(options.allowOrigins ?? ['http://localhost:8233', 'http://127.0.0.1:8233']);
  const maxBodyBytes = options.maxBodyBytes ?? 8 * 1024 * 1024;
  const server = createServer((req, res) => {
    const origin = req.headers.origin;
    if (origin !== undefined && allowOrigins.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', 'Content-Type, X-Namespace, Authorization');
      res.setHeader('Vary', 'Origin');
    }
    handle(req, res, options.codec, maxBodyBytes).catch((err: unknown) => {
      const known = err instanceof RequestError || err instanceof PayloadCodecError;
      const status = err instanceof RequestError ? err.status : known ? 400 : 500;
      const code = known ? err.code : 'INTERNAL';
      const message = known ? err.message : 'internal error';
      if (!res.headersSent) writeJson(res, status, { error: { code, message } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8888, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, codec: PayloadCodec, max: number): Promise<void> {
  const route = (req.url ?? '').split('?')[0];
  if (route !== '/encode' && route !== '/decode') throw new RequestError(404, 'NOT_FOUND', 'POST /encode or /decode');
  if (req.method === 'OPTIONS') {
    res.writeHead(204).end();
    return;
  }
  if (req.method !== 'POST') throw new RequestError(405, 'METHOD_NOT_ALLOWED', 'POST only');
  const body = await readBody(req, max);
  const payloads = parsePayloads(body);
  const result = route === '/encode' ? await codec.encode(payloads) : await codec.decode(payloads);
  writeJson(res, 200, { payloads: result.map(toJson) });
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
