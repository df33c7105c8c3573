import { statSync } from 'node:fs';
import Database from 'better-sqlite3';

/** The dev server's SQLite file on disk: the file, its write-ahead log and its shared-memory index, in bytes. */
export interface SqliteFiles {
  db: number;
  wal: number;
  shm: number;
}

const sizeOf = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

/** The sizes of `file`, `file-wal` and `file-shm` (0 for one that does not exist). */
export function sqliteFiles(file: string): SqliteFiles {
  return { db: sizeOf(file), wal: sizeOf(`${file}-wal`), shm: sizeOf(`${file}-shm`) };
}

export const totalBytes = (f: SqliteFiles) => f.db + f.wal;

/** One table (its indexes included) of the file: its pages' bytes, its rows, and the bytes its payload takes. */
export interface TableBytes {
  table: string;
  /** Bytes of the pages of the table and of its indexes. */
  bytes: number;
  rows: number;
  /** The table itself and each of its indexes: name and bytes, largest first. */
  parts: Array<{ name: string; bytes: number }>;
}

/**
 * Bytes of every table of a SQLite file that no process writes any more (dbstat: pages, indexes counted with their
 * table), largest first; the free pages as `(free pages)`.
 */
export function tableBytes(file: string): TableBytes[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const owners = new Map<string, string>(
      (db.prepare(`SELECT name, tbl_name FROM sqlite_schema`).all() as Array<{ name: string; tbl_name: string }>).map(
        (r) => [r.name, r.tbl_name],
      ),
    );
    const byTable = new Map<string, Array<{ name: string; bytes: number }>>();
    for (const r of db.prepare(`SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name`).all() as Array<{
      name: string;
      bytes: number;
    }>) {
      const table = owners.get(r.name) ?? r.name;
      byTable.set(table, [...(byTable.get(table) ?? []), r]);
    }
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const free = (db.pragma('freelist_count', { simple: true }) as number) * pageSize;
    const tables = [...byTable].map(([table, parts]) => ({
      table,
      bytes: parts.reduce((n, p) => n + p.bytes, 0),
      parts: parts.sort((a, b) => b.bytes - a.bytes),
      rows:
        table === 'sqlite_schema' ? 0 : (db.prepare(`SELECT COUNT(*) AS n FROM "${table}"`).get() as { n: number }).n,
    }));
    return [...tables, { table: '(free pages)', bytes: free, rows: 0, parts: [] }].sort((a, b) => b.bytes - a.bytes);
  } finally {
    db.close();
  }
}
