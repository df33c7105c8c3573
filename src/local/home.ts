import path from 'node:path';
import { IMAGEBATCH_HOME_ENV, IMAGEBATCH_LOCAL_ENV } from '../config/local-config';
import { userDataFolder } from '../util/data-folder';
import { LocalSettingError } from './errors';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Whether the CLI runs in local mode when no Temporal address is configured: yes unless `IMAGEBATCH_LOCAL` says no
 * (for a Temporal server of one's own on the default address). Any other value is refused by name.
 */
export function localModeAllowed(env: Env): boolean {
  const value = env[IMAGEBATCH_LOCAL_ENV]?.trim().toLowerCase();
  if (!value || ['1', 'true', 'on', 'yes', 'auto'].includes(value)) return true;
  if (['0', 'false', 'off', 'no'].includes(value)) return false;
  throw new LocalSettingError(IMAGEBATCH_LOCAL_ENV, 'must be on or off (1/0, true/false, yes/no)');
}

/** Local mode's default home, a folder of imagebatch's data folder (the ledger store's file is its sibling). */
export const LOCAL_HOME_FOLDER = 'local';

/**
 * Local mode's home: `$IMAGEBATCH_HOME`, else `imagebatch/local` under the user's data folder (`$XDG_DATA_HOME` or
 * `~/.local/share` on Linux, `~/Library/Application Support` on macOS, `%LOCALAPPDATA%` on Windows), beside the
 * ledger store's file and never around it: removing a home forgets Temporal's state, never what was paid. One home
 * holds one local Temporal server, its worker and their state; it is made absolute against the working directory.
 */
export function localHome(env: Env, platform: NodeJS.Platform = process.platform): string {
  const given = env[IMAGEBATCH_HOME_ENV]?.trim();
  return given ? path.resolve(given) : path.join(userDataFolder(env, platform), LOCAL_HOME_FOLDER);
}

/** Where each piece of local mode's state lives in its home. */
export interface LocalPaths {
  home: string;
  /** The Temporal dev server's SQLite file (with its `-wal` and `-shm` files beside it). */
  db: string;
  /** The running server: {@link ServerState}. */
  serverState: string;
  /** The running worker: {@link WorkerState}. */
  workerState: string;
  /** Held while a process starts or stops the server or the worker. */
  lock: string;
  logs: string;
  serverLog: string;
  workerLog: string;
}

export function localPaths(home: string): LocalPaths {
  const logs = path.join(home, 'logs');
  return {
    home,
    db: path.join(home, 'temporal.sqlite'),
    serverState: path.join(home, 'server.json'),
    workerState: path.join(home, 'worker.json'),
    lock: path.join(home, 'local.lock'),
    logs,
    serverLog: path.join(logs, 'dev-server.log'),
    workerLog: path.join(logs, 'worker.log'),
  };
}
