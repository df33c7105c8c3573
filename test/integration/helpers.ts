import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { RowRecord } from '../../src/model';
import { REPO_ROOT, ensureDistIsFresh } from '../helpers/dist';
import { WorkerProcess } from '../helpers/worker-process';

export { REPO_ROOT, ensureDistIsFresh, WorkerProcess };

/**
 * Helpers of the dev-server integration tests: the worker as a child process (`node bin/imagebatch.js worker`),
 * batch files, a counting proxy in front of the simulator, and row look-ups.
 */

/** Writes a batch file of `rows` distinct prompts (long enough never to be declined as generic) and ids. */
export async function writeBatchCsv(file: string, rows: number): Promise<string[]> {
  const ids = Array.from({ length: rows }, (_, i) => `r${String(i + 1).padStart(4, '0')}`);
  const lines = [
    'id,prompt,model',
    ...ids.map((id, i) => `${id},"a watercolour harbour at dawn, number ${i + 1}",sdxl`),
  ];
  await writeFile(file, `${lines.join('\n')}\n`);
  return ids;
}

/** Counts of answers by HTTP status, as a reverse proxy in front of the simulator's API sees them. */
export interface CountingProxy {
  baseUrl: string;
  statuses: Map<number, number>;
  /** 429 answers by `error.details.reason` (`rate_limit`, `min_poll_interval`, `concurrency_limit`, ...). */
  tooManyByReason: Map<string, number>;
  /** When each request reached the proxy (`Date.now()`), in order. */
  arrivals: number[];
  total(): number;
  close(): Promise<void>;
}

/**
 * A loopback reverse proxy that forwards every request to `target` as is and counts the answers by status: the
 * simulator keeps no count of its 429s, so the rate-limit test counts them on the wire.
 */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const upstream = new URL(target);
  const statuses = new Map<number, number>();
  const tooManyByReason = new Map<string, number>();
  const arrivals: number[] = [];
  const server: Server = createServer((req, res) => {
    arrivals.push(Date.now());
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        const status = answer.statusCode ?? 0;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        res.writeHead(status, answer.headers);
        if (status === 429) {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            const reason = /"reason":"([^"]*)"/.exec(Buffer.concat(chunks).toString('utf8'))?.[1] ?? 'unknown';
            tooManyByReason.set(reason, (tooManyByReason.get(reason) ?? 0) + 1);
          });
        }
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${upstream.pathname}`,
    statuses,
    tooManyByReason,
    arrivals,
    total: () => [...statuses.values()].reduce((a, b) => a + b, 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A row workflow as it ended: its status and, when it completed, its record (every row completes with one). */
export interface RowOutcome {
  rowId: string;
  status: string;
  /** Milliseconds from the row workflow's start to its close. */
  durationMs?: number;
  result?: RowRecord;
}

/**
 * Every row workflow (`${batchId}/${rowId}`) as it ended, a few at a time. A batch ends once every row has
 * signalled its record to it, which each row does just before its workflow completes with that record: a row may
 * still be closing, so each is awaited (bounded) before it is described.
 */
export async function rowOutcomes(client: Client, batchId: string, rowIds: readonly string[]): Promise<RowOutcome[]> {
  const out: RowOutcome[] = [];
  const queue = [...rowIds];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let rowId = queue.shift(); rowId !== undefined; rowId = queue.shift()) {
        const handle = client.workflow.getHandle<() => Promise<RowRecord>>(`${batchId}/${rowId}`);
        const result = await within(`row ${rowId}`, 30_000, handle.result()).catch(() => undefined);
        const { status, startTime, closeTime } = await handle.describe();
        out.push({
          rowId,
          status: status.name,
          ...(closeTime ? { durationMs: closeTime.getTime() - startTime.getTime() } : {}),
          ...(result ? { result } : {}),
        });
      }
    }),
  );
  return out.sort((a, b) => a.rowId.localeCompare(b.rowId));
}

/** sha256 hex of a file. */
export async function sha256Of(file: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
}

/** Polls `probe` every `everyMs` until it returns a value, or throws after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Rejects after `ms` with a message naming `what`; the timer never keeps the process alive. */
export async function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
