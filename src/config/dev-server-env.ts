import type { Env } from './env';

/**
 * The environment the Temporal dev server is started with: an explicit, small list, never the starter's own
 * environment minus some names. Whatever else the CLI holds (the image service key, a ledger URL with its password,
 * payload keys, Temporal Cloud's API key, any other secret of the shell) stays out of the server's process.
 * The server needs only to find programs and its home (its config folder), a temporary folder, the locale and the
 * time zone; the Windows names are what Go programs need there.
 */

/** Variables passed to the dev server when set (names compared case-insensitively, as Windows does). */
export const DEV_SERVER_ENV_NAMES = [
  'PATH',
  'HOME',
  'TMPDIR',
  'TMP',
  'TEMP',
  'LANG',
  'LANGUAGE',
  'TZ',
  'XDG_CONFIG_HOME',
  'XDG_CACHE_HOME',
  'SYSTEMROOT',
  'WINDIR',
  'USERPROFILE',
  'APPDATA',
  'LOCALAPPDATA',
] as const;

/** Locale variables (`LC_ALL`, `LC_TIME`, ...), passed too. */
const LOCALE_PREFIX = 'LC_';

/** The dev server's environment, taken from `env` (the starter's). */
export function devServerEnv(env: Env = process.env): Record<string, string> {
  const names = new Set<string>(DEV_SERVER_ENV_NAMES);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const upper = name.toUpperCase();
    if (value !== undefined && (names.has(upper) || upper.startsWith(LOCALE_PREFIX))) out[name] = value;
  }
  return out;
}
