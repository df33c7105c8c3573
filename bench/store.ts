/**
 * The ledger store's writes, as a worker makes them, on both backends: each key is a `decide` (its `sending`, under
 * the fingerprint's lock), then `accepted`, then `ended` with an image: three transactions, each committed to disk
 * (SQLite `synchronous = FULL`; PostgreSQL with its default `fsync = on`) before the call returns. `--writers` keys
 * are in flight at once in one process, as a worker's activities are. Then the store's size: `--size-keys` keys
 * written in transactions of 1,000, measured on disk and scaled to a million.
 *
 *   npx tsx bench/store.ts                          # 2,000 keys at 1 and 16 writers; 100,000 keys for the size
 *   npx tsx bench/store.ts --keys 500 --size-keys 20000
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openLedgerStore, type LedgerLocation, type LedgerStore, type NewLedgerEvent } from '../src/ledger';
import { startTestPostgres, type TestPostgres } from '../test/helpers/postgres';
import { num, toMarkdown } from './lib/table';

interface WriteRun {
  backend: string;
  writers: number;
  keys: number;
  seconds: number;
  /** Milliseconds per transaction. */
  p50: number;
  p99: number;
}

const request = (n: number) => ({
  prompt: `a lighthouse on a basalt cliff at dusk, oil painting, number ${n}`,
  model: 'flux-dev',
  width: 1024,
  height: 1024,
});

const image = (batchId: string, rowId: string) => ({
  url: `https://files.example/${batchId}/${rowId}-0.png`,
  path: `${rowId}/cr_${rowId}-0.png`,
  sha256: 'ab'.repeat(32),
  bytes: 812_345,
});

/** One key's life as a worker writes it: three transactions; each one's time in ms goes to `times`. */
async function oneKey(store: LedgerStore, batchId: string, n: number, times: number[]): Promise<void> {
  const rowId = `row-${n}`;
  const ids = { batchId, rowId, idempotencyKey: `ib/${batchId}/${rowId}/a1` };
  const timed = async (work: () => Promise<unknown>) => {
    const t = performance.now();
    await work();
    times.push(performance.now() - t);
  };
  await timed(() =>
    store.decide({
      ...ids,
      request: request(n),
      requestSha256: `body-${batchId}-${n}`,
      fingerprint: `print-${batchId}-${n}`,
      outDir: `/out/${batchId}`,
      reuse: true,
    }),
  );
  await timed(() => store.append([{ type: 'accepted', ...ids, creationId: `cr_${rowId}`, costUsd: 0.04 }]));
  await timed(() =>
    store.append([
      { type: 'ended', ...ids, outcome: 'succeeded', creationId: `cr_${rowId}`, images: [image(batchId, rowId)] },
    ]),
  );
}

async function writes(backend: string, store: LedgerStore, keys: number, writers: number): Promise<WriteRun> {
  const batchId = `bench-${writers}-${Date.now()}`;
  const times: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (next < keys) await oneKey(store, batchId, next++, times);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
  return { backend, writers, keys, seconds, p50: at(0.5), p99: at(0.99) };
}

/** Writes `keys` keys in transactions of 1,000 (a key's three events each). */
async function fill(store: LedgerStore, keys: number): Promise<void> {
  const batchId = 'size';
  for (let from = 0; from < keys; from += 1000) {
    const events: NewLedgerEvent[] = [];
    for (let n = from; n < Math.min(keys, from + 1000); n++) {
      const rowId = `row-${n}`;
      const ids = { batchId, rowId, idempotencyKey: `ib/${batchId}/${rowId}/a1` };
      events.push(
        {
          type: 'sending',
          ...ids,
          request: request(n),
          requestSha256: `b${n}`.padEnd(64, '0'),
          fingerprint: `f${n}`.padEnd(64, '0'),
        },
        { type: 'accepted', ...ids, creationId: `cr_${rowId}`, costUsd: 0.04 },
        { type: 'ended', ...ids, outcome: 'succeeded', creationId: `cr_${rowId}`, images: [image(batchId, rowId)] },
        {
          type: 'row',
          by: 'row',
          record: {
            batchId,
            rowId,
            state: 'succeeded',
            prompt: request(n).prompt,
            model: 'flux-dev',
            keys: [{ attempt: 1, idempotencyKey: ids.idempotencyKey, outcome: 'succeeded', creationId: `cr_${rowId}` }],
            creationIds: [`cr_${rowId}`],
            images: [image(batchId, rowId)],
            chargedUsd: 0.04,
            refundedUsd: 0,
            netUsd: 0.04,
            resubmittable: false,
          },
        },
      );
    }
    await store.append(events);
  }
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(path.join(dir, name))).size;
  return total;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback: number) => {
    const i = args.indexOf(name);
    return i === -1 ? fallback : Number(args[i + 1]);
  };
  const keys = flag('--keys', 2000);
  const sizeKeys = flag('--size-keys', 100_000);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ib-bench-store-'));
  let server: TestPostgres | undefined;
  const runs: WriteRun[] = [];
  const sizes: { backend: string; bytesPerKey: number; perMillionGb: number }[] = [];
  try {
    server = await startTestPostgres({ durable: true });
    const backends: {
      name: string;
      open: (tag: string) => Promise<{ location: LedgerLocation; size: () => Promise<number> }>;
    }[] = [
      {
        name: 'SQLite',
        open: async (tag) => {
          const folder = await mkdtemp(path.join(dir, `${tag}-`));
          return {
            location: { kind: 'sqlite', file: path.join(folder, 'ledger.sqlite') },
            size: () => folderBytes(folder),
          };
        },
      },
      {
        name: 'PostgreSQL',
        open: async (tag) => {
          const url = await server!.createDatabase(tag.replace(/-/g, '_'));
          return {
            location: { kind: 'postgres', url },
            size: async () => {
              const client = new pg.Client({ connectionString: url });
              await client.connect();
              try {
                const r = await client.query<{ size: string }>('SELECT pg_database_size(current_database()) AS size');
                return Number(r.rows[0]!.size);
              } finally {
                await client.end();
              }
            },
          };
        },
      },
    ];
    for (const backend of backends) {
      for (const writers of [1, 16]) {
        const { location } = await backend.open(`w${writers}`);
        const store = await openLedgerStore(location);
        try {
          process.stderr.write(`${backend.name}: ${keys} keys, ${writers} writer(s)\n`);
          runs.push(await writes(backend.name, store, keys, writers));
        } finally {
          await store.close();
        }
      }
      const { location, size } = await backend.open('size');
      const store = await openLedgerStore(location);
      try {
        const empty = await size();
        process.stderr.write(`${backend.name}: ${sizeKeys} keys for the size\n`);
        await fill(store, sizeKeys);
        await store.close();
        // SQLite: the write-ahead log is checkpointed into the file on close; PostgreSQL: the database's own size.
        const bytesPerKey = ((await size()) - empty) / sizeKeys;
        sizes.push({ backend: backend.name, bytesPerKey, perMillionGb: (bytesPerKey * 1e6) / 1e9 });
      } catch (err) {
        await store.close().catch(() => undefined);
        throw err;
      }
    }
  } finally {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log(
    toMarkdown({
      title: 'Ledger store writes (each transaction committed to disk before it returns)',
      headers: ['backend', 'writers', 'keys', 'transactions/s', 'keys/s', 'p50 ms', 'p99 ms'],
      rows: runs.map((r) => [
        r.backend,
        r.writers,
        num(r.keys),
        num((r.keys * 3) / r.seconds),
        num(r.keys / r.seconds),
        num(r.p50, 2),
        num(r.p99, 2),
      ]),
      notes: [
        'A key is 3 transactions: decide (its sending, under the fingerprint lock), accepted, ended with one image.',
        `Machine: ${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.`,
      ],
    }),
  );
  console.log(
    toMarkdown({
      title: `Ledger store size (${num(sizeKeys)} keys of one row each, a succeeded key and its row record)`,
      headers: ['backend', 'bytes per key', 'per million keys'],
      rows: sizes.map((s) => [s.backend, num(s.bytesPerKey), `${num(s.perMillionGb, 2)} GB`]),
      notes: [
        'Measured on disk after the writes (SQLite: the file after its last checkpoint; PostgreSQL: pg_database_size).',
      ],
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
