import { chmodSync, statSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteDriver } from '../../src/ledger/sqlite';

/**
 * Issue 44, point 7: a SQLite store imagebatch creates, its WAL and its shared memory file are its owner's only
 * (0600), whatever the umask and the folder's mode; the WAL holds wrapped keys.
 */

const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);

describe.skipIf(process.platform === 'win32')('a new SQLite store', () => {
  it('is created 0600, and so are its -wal and -shm, in a 0755 folder under umask 022', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ib-mode-'));
    chmodSync(dir, 0o755);
    const file = path.join(dir, 'ledger.sqlite');
    const umask = process.umask(0o022);
    const driver = new SqliteDriver(file);
    try {
      await driver.transaction(async (sql) => {
        await sql.run('CREATE TABLE t (v TEXT)');
        await sql.run('INSERT INTO t VALUES (?)', ['a wrapped key']);
      });
      expect([mode(file), mode(`${file}-wal`), mode(`${file}-shm`)]).toEqual(['600', '600', '600']);
    } finally {
      await driver.close();
      process.umask(umask);
    }
  });
});
