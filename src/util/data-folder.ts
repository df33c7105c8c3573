import os from 'node:os';
import path from 'node:path';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * imagebatch's folder under the user's data folder: `$XDG_DATA_HOME` or `~/.local/share` on Linux,
 * `~/Library/Application Support` on macOS, `%LOCALAPPDATA%` on Windows, then `imagebatch`. Never relative to the
 * working directory. Local mode's home and the ledger store's default file live here.
 */
export function userDataFolder(env: Env, platform: NodeJS.Platform = process.platform): string {
  const home = env.HOME?.trim() || os.homedir();
  let data: string;
  if (platform === 'win32') data = env.LOCALAPPDATA?.trim() || path.join(home, 'AppData', 'Local');
  else if (platform === 'darwin') data = path.join(home, 'Library', 'Application Support');
  else {
    const xdg = env.XDG_DATA_HOME?.trim();
    // The XDG spec ignores a relative XDG_DATA_HOME.
    data = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.local', 'share');
  }
  return path.join(data, 'imagebatch');
}

/**
 * imagebatch's folder under the user's config folder: `$XDG_CONFIG_HOME` or `~/.config` on Linux,
 * `~/Library/Preferences` on macOS, `%APPDATA%` on Windows, then `imagebatch`. It holds what must outlive a data
 * folder: the record of the ledger stores this user used (src/ledger/known-stores.ts).
 */
export function userConfigFolder(env: Env, platform: NodeJS.Platform = process.platform): string {
  const home = env.HOME?.trim() || os.homedir();
  let config: string;
  if (platform === 'win32') config = env.APPDATA?.trim() || path.join(home, 'AppData', 'Roaming');
  else if (platform === 'darwin') config = path.join(home, 'Library', 'Preferences');
  else {
    const xdg = env.XDG_CONFIG_HOME?.trim();
    config = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.config');
  }
  return path.join(config, 'imagebatch');
}
