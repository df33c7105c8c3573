import pg from 'pg';
import type { Sql, SqlDriver } from './sql';

/**
 * Connections each process keeps at most: a worker's activities each hold one for a transaction of a few
 * milliseconds, so a few serve hundreds of rows in flight.
 */
const POOL_SIZE = 8;

/** How long a connection attempt may take before the store says it is out of reach. */
const CONNECT_TIMEOUT_MS = 10_000;

/** BIGINT (OID 20) as a number: times in milliseconds and positions fit well within 2^53. */
const BIGINT_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === BIGINT_OID
      ? (value: string) => Number(value)
      : (pg.types.getTypeParser(oid, format) as unknown)) as typeof pg.types.getTypeParser,
};

/**
 * The ledger store's PostgreSQL driver, for a deployment beyond one machine: every worker and command of it uses one
 * database. A commit is durable when it returns (PostgreSQL's default `synchronous_commit`). Decisions about one
 * request are serialised across hosts by a transaction-scoped advisory lock on its fingerprint.
 */
export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres' as const;
  private readonly pool: pg.Pool;

  constructor(url: string) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: POOL_SIZE,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      types,
    });
    // An idle connection that the server closes must not end the process.
    this.pool.on('error', () => undefined);
  }

  async transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const sql: Sql = {
      all: async <R>(text: string, params: readonly unknown[] = []) =>
        (await client.query(numbered(text), [...params])).rows as R[],
      get: async <R>(text: string, params: readonly unknown[] = []) =>
        (await client.query(numbered(text), [...params])).rows[0] as R | undefined,
      run: async (text: string, params: readonly unknown[] = []) =>
        (await client.query(numbered(text), [...params])).rowCount ?? 0,
      lock: async (name: string) => {
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [name]);
      },
    };
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await work(sql);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
      throw err;
    } finally {
      // A connection whose rollback failed is not given back to the pool.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/** `?` placeholders as PostgreSQL's `$1, $2, ...` (the store's statements hold no `?` of their own). */
const cache = new Map<string, string>();
function numbered(text: string): string {
  let out = cache.get(text);
  if (out === undefined) {
    let n = 0;
    out = text.replace(/\?/g, () => `$${++n}`);
    cache.set(text, out);
  }
  return out;
}
