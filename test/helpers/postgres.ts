import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/util/net';
import { refuseInUnitProject } from './project';

/**
 * A throwaway PostgreSQL server for tests: a new cluster in a temporary folder, on a free loopback port, with a
 * password. As root it runs as the `postgres` user (PostgreSQL refuses root). A missing PostgreSQL is an error that
 * says how to install it, never a skipped test (`node scripts/setup.mjs --postgres` installs it).
 */
export interface TestPostgres {
  /** A URL of the `postgres` database, as superuser `imagebatch`. */
  url: string;
  /** A new, empty database; its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

const USER = 'imagebatch';
const PASSWORD = 'test-password';

/** The folder of initdb, postgres and pg_isready: PATH, else Debian's /usr/lib/postgresql/<major>/bin. */
function postgresBin(): string {
  const names = ['initdb', 'postgres', 'pg_isready'];
  const dirs = (process.env.PATH ?? '').split(path.delimiter);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const majors = readdirSync(debian).filter((v) => /^\d+$/.test(v));
    majors.sort((a, b) => Number(b) - Number(a));
    dirs.push(...majors.map((v) => path.join(debian, v, 'bin')));
  }
  const found = dirs.find((d) => d && names.every((n) => existsSync(path.join(d, n))));
  if (!found) {
    throw new Error('PostgreSQL is not installed (initdb, postgres, pg_isready): node scripts/setup.mjs --postgres');
  }
  return found;
}

/**
 * @param options.durable keep PostgreSQL's default `fsync = on` (a benchmark of commits); tests turn it off, as what
 * they check is what is written, not how fast it reaches the disk.
 */
export async function startTestPostgres(options: { durable?: boolean } = {}): Promise<TestPostgres> {
  refuseInUnitProject('a PostgreSQL server');
  const bin = postgresBin();
  const base = mkdtempSync(path.join(os.tmpdir(), 'ib-test-pg-'));
  chmodSync(base, 0o700);
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot ? idsOf('postgres') : {};
  if (asRoot) chownSync(base, ids.uid!, ids.gid!);
  const pwfile = path.join(base, 'pwfile');
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
  if (asRoot) chownSync(pwfile, ids.uid!, ids.gid!);
  const env = { PATH: process.env.PATH ?? '', LC_ALL: 'C' };
  const data = path.join(base, 'data');
  const init = spawnSync(
    path.join(bin, 'initdb'),
    [
      '-D',
      data,
      '-U',
      USER,
      `--pwfile=${pwfile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ],
    { env, cwd: base, encoding: 'utf8', ...ids },
  );
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
  const port = await freePort();
  const server: ChildProcess = spawn(
    path.join(bin, 'postgres'),
    [
      ...['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      ...(options.durable ? [] : ['-c', 'fsync=off']),
    ],
    { env, cwd: base, stdio: 'ignore', ...ids },
  );
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const ready = () =>
    spawnSync(path.join(bin, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-q']).status === 0;
  for (let i = 0; !ready(); i++) {
    if (i >= 200 || server.exitCode !== null) {
      server.kill('SIGKILL');
      throw new Error(`PostgreSQL did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    async createDatabase(name) {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return url.replace(/\/postgres$/, `/${name}`);
    },
    async stop() {
      if (server.exitCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGINT'); // fast shutdown
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (server.exitCode === null) server.kill('SIGKILL');
      }
      rmSync(base, { recursive: true, force: true });
    },
  };
}

function idsOf(user: string): { uid?: number; gid?: number } {
  const uid = spawnSync('id', ['-u', user], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) throw new Error(`no user ${user} to run PostgreSQL as (it refuses root)`);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
