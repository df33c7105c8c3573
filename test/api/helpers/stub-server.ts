import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the stub does with one request. */
export type StubReply =
  | { status: number; headers?: Record<string, string | undefined>; body?: unknown }
  /** Destroys the connection without answering (a reset after the request was read). */
  | { reset: true }
  /** Sends the headers, then never the body. */
  | { stallBody: true; status: number }
  /** Never answers at all. */
  | { hang: true }
  /** Streams `bytes` bytes of `byte` with the given headers. */
  | { status: number; headers?: Record<string, string | undefined>; stream: { bytes: number; byte?: number } };

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface StubServer {
  url: string;
  origin: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * A loopback HTTP server that answers each request from `reply` and records every request it saw. Bodies that
 * are not strings or Buffers are sent as JSON.
 */
export async function startStub(
  reply: (req: RecordedRequest, index: number) => StubReply | Promise<StubReply>,
): Promise<StubServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(rec);
      void Promise.resolve(reply(rec, requests.length - 1)).then((r) => {
        if ('reset' in r) {
          req.socket.destroy();
          return;
        }
        if ('hang' in r) return;
        if ('stallBody' in r) {
          res.writeHead(r.status, { 'content-type': 'application/json', 'content-length': '100' });
          res.write('{');
          return;
        }
        if ('stream' in r) {
          res.writeHead(r.status, defined(r.headers));
          const chunk = Buffer.alloc(16 * 1024, r.stream.byte ?? 0x61);
          let left = r.stream.bytes;
          const pump = () => {
            while (left > 0) {
              const n = Math.min(left, chunk.length);
              left -= n;
              if (!res.write(chunk.subarray(0, n))) {
                res.once('drain', pump);
                return;
              }
            }
            res.end();
          };
          res.on('error', () => undefined);
          pump();
          return;
        }
        const body =
          r.body === undefined
            ? ''
            : typeof r.body === 'string' || Buffer.isBuffer(r.body)
              ? r.body
              : JSON.stringify(r.body);
        res.writeHead(r.status, { 'content-type': 'application/json', ...defined(r.headers) });
        res.end(body);
      });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/api/public/v1`,
    origin,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A key of the right format that is easy to search for in captured output. */
export const SECRET_KEY = 'img_live_SeCrEt0123456789abcdefghijKLMNOPQRSTUVWX';

function defined(headers: Record<string, string | undefined> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined));
}
