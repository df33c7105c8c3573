import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import type { Sql, SqlDriver } from './sql';

/**
 * better-sqlite3 for this Node. On Node 22 and later, version 13 (`better-sqlite3-napi`): Node-API, with its own
 * prebuilt binaries, and no abort at exit (version 12's objects, destroyed after Node 24 has torn its environment
 * down, abort the process: `Assertion failed: (env) != nullptr`, seen in CI). On Node 20, version 12, built here
 * (13 does not run on 20). The two have one API.
 */
export const SQLITE_MODULE =
  Number(process.versions.node.split('.')[0]) >= 22 ? 'better-sqlite3-napi' : 'better-sqlite3';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Sqlite = require(SQLITE_MODULE) as typeof Database;

/** How long a write waits for another process's write transaction to end before it fails (the worker retries it). */
const BUSY_TIMEOUT_MS = 30_000;

/**
 * The ledger store's SQLite driver: one file, shared by the processes of one machine (the worker and the commands).
 * WAL journal, so readers never wait for the writer; `synchronous = FULL`, so a commit is on disk when it returns
 * (a `sending` before its request leaves). better-sqlite3 is synchronous: each transaction runs to its end before
 * the next starts, one after the other within the process, and `BEGIN IMMEDIATE` takes the write lock at once.
 */
export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite' as const;
  private readonly db: Database.Database;
  /** The transaction under way in this process: the next waits for it. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Statements compiled once. */
  private readonly statements = new Map<string, Database.Statement>();

  constructor(file: string) {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    createPrivate(file);
    this.db = new Sqlite(file, { timeout: BUSY_TIMEOUT_MS });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
  }

  transaction<T>(work: (sql: Sql) => Promise<T>, options: { readOnly?: boolean } = {}): Promise<T> {
    const next = this.queue.then(() => this.run(work, options.readOnly === true));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async run<T>(work: (sql: Sql) => Promise<T>, readOnly: boolean): Promise<T> {
    const db = this.db;
    const sql: Sql = {
      all: async <R>(text: string, params: readonly unknown[] = []) => this.statement(text).all(...params) as R[],
      get: async <R>(text: string, params: readonly unknown[] = []) =>
        this.statement(text).get(...params) as R | undefined,
      run: async (text: string, params: readonly unknown[] = []) => this.statement(text).run(...params).changes,
      lock: async () => undefined,
    };
    // A reader takes no lock until it reads (WAL: it never waits for the writer); a writer takes the lock at once.
    db.exec(readOnly ? 'BEGIN' : 'BEGIN IMMEDIATE');
    try {
      const result = await work(sql);
      db.exec('COMMIT');
      return result;
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw err;
    }
  }

  private statement(text: string): Database.Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  async close(): Promise<void> {
    await this.queue;
    if (this.db.open) this.db.close();
  }
}

/**
 * Creates `file` empty and readable by its owner only (0600) when it does not exist; SQLite gives its `-wal` and
 * `-shm` the mode of the database. A store that exists keeps its mode: only files imagebatch creates are tightened.
 */
function createPrivate(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * One driver per file in a process, shared by every store opened on it and closed with the last: two connections of
 * one thread would wait on each other's write lock (better-sqlite3 waits synchronously).
 */
const shared = new Map<string, { driver: SqliteDriver; users: number }>();

export function sharedSqliteDriver(file: string): SqlDriver {
  const resolved = path.resolve(file);
  let entry = shared.get(resolved);
  if (!entry) {
    entry = { driver: new SqliteDriver(resolved), users: 0 };
    shared.set(resolved, entry);
  }
  entry.users += 1;
  const { driver } = entry;
  let closed = false;
  return {
    dialect: driver.dialect,
    transaction: (work, options) => driver.transaction(work, options),
    close: async () => {
      if (closed) return;
      closed = true;
      const current = shared.get(resolved);
      if (!current || current.driver !== driver || --current.users > 0) return;
      shared.delete(resolved);
      await driver.close();
    },
  };
}
