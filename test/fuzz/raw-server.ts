import net from 'node:net';

/**
 * A loopback TCP server that answers HTTP requests with raw bytes, so that a test can send what no HTTP library
 * would: a Content-Length that lies, two of them, a status line that is not one, a body that drips forever.
 */

/** One step of an answer. */
export type RawStep =
  /** Writes these bytes. */
  | { write: string | Buffer }
  /** Waits. */
  | { wait: number }
  /** Writes one byte of `bytes` every `everyMs`, starting over when done, until the client goes away. */
  | { drip: string | Buffer; everyMs: number }
  /** Writes `chunk` as fast as the client reads, until it goes away. */
  | { flood: Buffer }
  /** Closes the sending side (FIN); the connection stays readable. */
  | { end: true }
  /** Destroys the connection at once. */
  | { destroy: true }
  /** Does nothing more, ever (until the server closes). */
  | { hang: true };

export interface RawRequest {
  head: string;
  body: string;
  /** Header value by lower-case name (the first one). */
  header(name: string): string | undefined;
}

export interface RawServer {
  origin: string;
  /** `${origin}/api/public/v1` */
  url: string;
  requests: RawRequest[];
  /** Bytes written to clients so far, all connections together. */
  readonly bytesWritten: number;
  close(): Promise<void>;
}

const HEAD_END = '\r\n\r\n';
/** The longest request head accepted: the clients under test send small ones. */
const MAX_HEAD = 64 * 1024;

export async function startRawServer(answer: (req: RawRequest, index: number) => RawStep[]): Promise<RawServer> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const requests: RawRequest[] = [];
  let written = 0;
  let closing = false;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });
  const write = (socket: net.Socket, data: string | Buffer): boolean => {
    if (socket.destroyed || socket.writableEnded) return false;
    written += Buffer.byteLength(data);
    return socket.write(data);
  };

  /** Runs the steps; false when the connection is finished with (ended, destroyed or hung). */
  async function play(socket: net.Socket, steps: RawStep[]): Promise<boolean> {
    for (const step of steps) {
      if (socket.destroyed || closing) return false;
      if ('write' in step) write(socket, step.write);
      else if ('wait' in step) await sleep(step.wait);
      else if ('drip' in step) {
        const bytes = Buffer.from(step.drip);
        for (let i = 0; !socket.destroyed && !closing; i = (i + 1) % bytes.length) {
          write(socket, bytes.subarray(i, i + 1));
          await sleep(step.everyMs);
        }
        return false;
      } else if ('flood' in step) {
        while (!socket.destroyed && !closing) {
          if (!write(socket, step.flood)) {
            await new Promise<void>((resolve) => {
              socket.once('drain', resolve);
              socket.once('close', resolve);
            });
          }
        }
        return false;
      } else if ('end' in step) {
        socket.end();
        return false;
      } else if ('destroy' in step) {
        socket.destroy();
        return false;
      } else {
        return false;
      }
    }
    return true;
  }

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffer = Buffer.alloc(0);
    let busy = false;
    const next = (): void => {
      if (busy || socket.destroyed) return;
      const end = buffer.indexOf(HEAD_END);
      if (end < 0) {
        if (buffer.length > MAX_HEAD) socket.destroy();
        return;
      }
      const head = buffer.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < end + 4 + length) return;
      const body = buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      buffer = buffer.subarray(end + 4 + length);
      const req: RawRequest = {
        head,
        body,
        header: (name) => new RegExp(`\\r\\n${name}:\\s*([^\\r]*)`, 'i').exec(head)?.[1]?.trim(),
      };
      requests.push(req);
      busy = true;
      void play(socket, answer(req, requests.length - 1)).then((more) => {
        busy = false;
        if (more) next();
      });
    };
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: `${origin}/api/public/v1`,
    requests,
    get bytesWritten() {
      return written;
    },
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        for (const t of timers) clearTimeout(t);
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A complete response head (status line, headers, blank line). */
export function head(status: string, headers: Record<string, string | number> = {}): string {
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  return `HTTP/1.1 ${status}\r\n${lines.join('')}\r\n`;
}
