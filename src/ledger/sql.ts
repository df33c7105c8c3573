/**
 * What the ledger store needs of a SQL database, and its tables. Two drivers give it: SQLite on one machine
 * (sqlite.ts) and PostgreSQL beyond it (postgres.ts). The statements are written once, with `?` placeholders, in the
 * SQL both understand; only the table definitions differ by dialect.
 */

export type Dialect = 'sqlite' | 'postgres';

/** Statements inside one transaction. */
export interface Sql {
  all<R>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  get<R>(sql: string, params?: readonly unknown[]): Promise<R | undefined>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /**
   * Holds `name` until the transaction ends, against every other transaction of the database that asks for it (a
   * PostgreSQL advisory lock; in SQLite every write transaction holds the whole database already).
   */
  lock(name: string): Promise<void>;
}

export interface SqlDriver {
  readonly dialect: Dialect;
  /**
   * Runs `work` in one transaction: committed (and on disk) when it resolves, rolled back when it throws. A
   * `readOnly` one writes nothing, and need not wait for writers.
   */
  transaction<T>(work: (sql: Sql) => Promise<T>, options?: { readOnly?: boolean }): Promise<T>;
  close(): Promise<void>;
}

/** The version of the tables below; a store of a newer version is refused, not written. */
export const SCHEMA_VERSION = 1;

/**
 * The tables, for one dialect. JSON is kept as text; times are milliseconds since the epoch. The names start with
 * `ledger_`: a PostgreSQL database may be shared with other tables.
 */
export function schemaStatements(dialect: Dialect): string[] {
  const serial = dialect === 'sqlite' ? 'INTEGER PRIMARY KEY AUTOINCREMENT' : 'BIGSERIAL PRIMARY KEY';
  const real = dialect === 'sqlite' ? 'REAL' : 'DOUBLE PRECISION';
  return [
    'CREATE TABLE IF NOT EXISTS ledger_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)',
    `CREATE TABLE IF NOT EXISTS ledger_batches (
      seq ${serial},
      batch_id TEXT NOT NULL,
      at BIGINT NOT NULL,
      entry TEXT NOT NULL
    )`,
    'CREATE INDEX IF NOT EXISTS ledger_batches_by_id ON ledger_batches (batch_id, seq)',
    `CREATE TABLE IF NOT EXISTS ledger_rows (
      seq ${serial},
      batch_id TEXT NOT NULL,
      row_id TEXT NOT NULL,
      record TEXT,
      record_by TEXT,
      reused_from TEXT,
      updated_at BIGINT NOT NULL,
      UNIQUE (batch_id, row_id)
    )`,
    // One earlier key serves at most one row of a batch: the same prompt twice in one file is two requests.
    'CREATE UNIQUE INDEX IF NOT EXISTS ledger_rows_reuse ON ledger_rows (batch_id, reused_from)',
    `CREATE TABLE IF NOT EXISTS ledger_keys (
      seq ${serial},
      idempotency_key TEXT NOT NULL UNIQUE,
      batch_id TEXT NOT NULL,
      row_id TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      outcome TEXT,
      creation_id TEXT,
      cost_usd ${real},
      first_sent_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      state TEXT NOT NULL
    )`,
    'CREATE INDEX IF NOT EXISTS ledger_keys_by_fingerprint ON ledger_keys (fingerprint, seq)',
    'CREATE INDEX IF NOT EXISTS ledger_keys_by_row ON ledger_keys (batch_id, row_id, seq)',
    // Settings of a worker under which a canary or doctor's paid test saw the service understood (added in schema 1:
    // an older imagebatch never reads it).
    `CREATE TABLE IF NOT EXISTS ledger_proofs (
      settings TEXT PRIMARY KEY,
      proof TEXT NOT NULL,
      at BIGINT NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS ledger_imports (
      file TEXT PRIMARY KEY,
      bytes BIGINT NOT NULL,
      at BIGINT NOT NULL
    )`,
  ];
}
