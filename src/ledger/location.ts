import { readFileSync } from 'node:fs';
import path from 'node:path';
import { userDataFolder } from '../util/data-folder';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { PostgresDriver } from './postgres';
import { sharedSqliteDriver } from './sqlite';
import { SqlLedgerStore } from './sql-store';
import { LedgerUnavailableError, type LedgerStore } from './store';

type Env = Readonly<Record<string, string | undefined>>;

/** The one setting of the ledger store: an absolute file path (SQLite) or a `postgres://` URL. */
export const IMAGEBATCH_LEDGER_ENV = 'IMAGEBATCH_LEDGER';

/**
 * A file holding the password of a `postgres://` store whose URL has none (a secret mounted as a file: the password
 * in no environment variable and no command line).
 */
export const IMAGEBATCH_LEDGER_PASSWORD_FILE_ENV = 'IMAGEBATCH_LEDGER_PASSWORD_FILE';

/** The default store's file, in imagebatch's folder of the user's data folder (never in local mode's home). */
export const DEFAULT_LEDGER_FILE = 'ledger.sqlite';

/** Where a deployment's ledger store is. */
export type LedgerLocation = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string };

/** `IMAGEBATCH_LEDGER` cannot be used; the value is not quoted (a URL may hold a password). */
export class LedgerSettingError extends ImagebatchError {
  readonly code = ErrorCode.ConfigInvalid;
  constructor(readonly problem: string) {
    super(`${IMAGEBATCH_LEDGER_ENV}: ${problem}`);
  }
}

/**
 * The store `IMAGEBATCH_LEDGER` names: a `postgres://` (or `postgresql://`) URL, or an absolute path of a SQLite
 * file. Unset, the SQLite file `ledger.sqlite` in imagebatch's folder of the user's data folder
 * (`~/.local/share/imagebatch` on Linux): the same for every command and worker of the user on this machine, whatever
 * the working directory, and apart from local mode's Temporal state (`IMAGEBATCH_HOME` does not move it).
 */
export function ledgerLocation(env: Env, platform: NodeJS.Platform = process.platform): LedgerLocation {
  const value = env[IMAGEBATCH_LEDGER_ENV]?.trim();
  if (!value) return { kind: 'sqlite', file: path.join(userDataFolder(env, platform), DEFAULT_LEDGER_FILE) };
  if (/^postgres(ql)?:\/\//i.test(value)) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new LedgerSettingError('is not a valid postgres:// URL');
    }
    const passwordFile = env[IMAGEBATCH_LEDGER_PASSWORD_FILE_ENV]?.trim();
    if (passwordFile && !url.password) {
      let password: string;
      try {
        password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
        throw new LedgerSettingError(
          `its password file (${IMAGEBATCH_LEDGER_PASSWORD_FILE_ENV}) cannot be read: ${code}`,
        );
      }
      url.password = encodeURIComponent(password);
    }
    return { kind: 'postgres', url: url.toString() };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new LedgerSettingError('must be a postgres:// URL or the absolute path of a SQLite file');
  }
  if (!path.isAbsolute(value)) {
    throw new LedgerSettingError(
      'must be an absolute path (a relative one would name another file in each working directory)',
    );
  }
  return { kind: 'sqlite', file: value };
}

/** Query keys of a `postgres://` URL that carry a secret (`?password=`, `sslpassword`) or a secret's path (`sslkey`). */
const SECRET_QUERY_KEY = /password|secret|^sslkey$/i;

/** The location for messages, logs and the record of stores: a URL loses its password, in its user part or query. */
export function describeLedgerLocation(location: LedgerLocation): string {
  if (location.kind === 'sqlite') return location.file;
  const url = new URL(location.url);
  if (url.password) url.password = '***';
  for (const key of new Set(url.searchParams.keys())) {
    if (SECRET_QUERY_KEY.test(key)) url.searchParams.set(key, '***');
  }
  return url.toString();
}

/** Opens the store at `location`; one that cannot be opened is a {@link LedgerUnavailableError} saying why. */
export async function openLedgerStore(location: LedgerLocation): Promise<LedgerStore> {
  const where = describeLedgerLocation(location);
  try {
    if (location.kind === 'sqlite') return await SqlLedgerStore.open(sharedSqliteDriver(location.file), where);
    const driver = new PostgresDriver(location.url);
    return await SqlLedgerStore.open(driver, where).catch(async (err: unknown) => {
      await driver.close().catch(() => undefined);
      throw err;
    });
  } catch (err) {
    if (err instanceof ImagebatchError) throw err;
    throw new LedgerUnavailableError(where, err instanceof Error ? err.message : String(err), { cause: err });
  }
}
