import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { type ApiResponse } from './responses';

export interface BodyRead {
  body: Buffer;
  /** More than `maxBytes` arrived; only the first `maxBytes` are kept. */
  tooLarge: boolean;
  /** Far too large: the server stopped reading and will close the connection after its answer. */
  abandoned: boolean;
}

/** How far past the cap the server keeps reading (and discarding) so that the client still gets an answer. */
const DRAIN_FACTOR = 16;

/** The client went away before its body was complete: there is nobody to answer. */
export class ClientGoneError extends ImagebatchError {
  readonly code = ErrorCode.ClientGone;
}

/** Reads a request body, keeping at most `maxBytes` of it in memory whatever the client sends. */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let total = 0;
    const detach = () => {
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      req.removeListener('error', onError);
      req.removeListener('close', onClose);
    };
    const finish = (abandoned: boolean) => {
      detach();
      resolve({ body: Buffer.concat(chunks, kept), tooLarge: total > maxBytes, abandoned });
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (kept < maxBytes) {
        const part = chunk.subarray(0, maxBytes - kept);
        chunks.push(part);
        kept += part.length;
      }
      if (total > maxBytes * DRAIN_FACTOR) {
        req.pause();
        finish(true);
      }
    };
    const onEnd = () => finish(false);
    const onError = (err: Error) => {
      detach();
      reject(new ClientGoneError(err.message));
    };
    const onClose = () => {
      detach();
      reject(new ClientGoneError('the client closed the connection mid-body'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** Writes a JSON response with an exact Content-Length. */
export function writeJson(res: ServerResponse, response: ApiResponse, extra?: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(response.body);
  res.writeHead(response.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...response.headers,
    ...extra,
  });
  res.end(text);
}

/** Listens on `host:port` and resolves to the port actually bound. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      const address = server.address();
      if (address && typeof address === 'object') resolve(address.port);
      else reject(new Error('server has no TCP address'));
    });
  });
}

/** Stops accepting, ends every connection, resolves when the server is closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
