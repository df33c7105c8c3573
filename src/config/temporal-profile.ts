import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadClientConfig } from '@temporalio/envconfig';
import { describeValue, looksLikeSecret, unreadableFile } from './redact';
import { ConfigError } from './service-config';

/**
 * Temporal connection profiles: the TOML client config file that the `temporal` CLI and every Temporal SDK read
 * (`[profile.<name>]` with `address`, `namespace`, `api_key`, `[profile.<name>.tls]`, `[profile.<name>.grpc_meta]`).
 * Parsing and the environment's overrides are `@temporalio/envconfig`'s (./temporal-config). Choosing the file and
 * the profile, and every error message, are ours: envconfig ignores a file named by `TEMPORAL_CONFIG_FILE` that does
 * not exist, and its messages quote the lines of the file and the profile's name (either may hold an API key).
 */

/** Path of the config file. Unset: the standard location (see {@link defaultConfigFile}). */
export const TEMPORAL_CONFIG_FILE_ENV = 'TEMPORAL_CONFIG_FILE';
/** Name of the profile to use. Unset: `default`, when the file has one. */
export const TEMPORAL_PROFILE_ENV = 'TEMPORAL_PROFILE';
const DEFAULT_PROFILE = 'default';

/** The profile that applies: its file's text, its name, and how messages name the file. */
export interface LoadedProfile {
  /** The profile's name. */
  name: string;
  /**
   * How messages name the file: `TEMPORAL_CONFIG_FILE` when that variable named it (a path from a variable is never
   * printed: it may be a secret put in the wrong variable), its path when it is the one at the standard location.
   */
  label: string;
  /** The file's text (it parses, and it has the profile). */
  text: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The standard location of the config file, as Temporal's envconfig defines it: `temporalio/temporal.toml` under
 * `$XDG_CONFIG_HOME` (or `~/.config`) on Linux, `~/Library/Application Support` on macOS, `%APPDATA%` on Windows.
 */
export function defaultConfigFile(env: Env, platform: NodeJS.Platform = process.platform): string | undefined {
  const home = blankToUndefined(env.HOME);
  let dir: string | undefined;
  if (platform === 'win32') dir = blankToUndefined(env.APPDATA);
  else if (platform === 'darwin') dir = home && path.join(home, 'Library', 'Application Support');
  else {
    const xdg = blankToUndefined(env.XDG_CONFIG_HOME);
    // The XDG spec ignores a relative XDG_CONFIG_HOME; so does envconfig.
    dir = xdg ? (path.isAbsolute(xdg) ? xdg : undefined) : home && path.join(home, '.config');
  }
  return dir && path.join(dir, 'temporalio', 'temporal.toml');
}

/**
 * The profile that applies, or undefined when there is none: no config file at the standard location and none
 * named, or a file without a `default` profile while `TEMPORAL_PROFILE` is unset. A file named by
 * `TEMPORAL_CONFIG_FILE` must exist, and a profile named by `TEMPORAL_PROFILE` must be in it.
 */
export function loadTemporalProfile(env: Env): LoadedProfile | undefined {
  const namedFile = blankToUndefined(env[TEMPORAL_CONFIG_FILE_ENV]);
  const wanted = blankToUndefined(env[TEMPORAL_PROFILE_ENV]);
  const file = namedFile ?? defaultConfigFile(env);
  const text = file === undefined ? undefined : readConfigFile(file, namedFile !== undefined);
  if (file === undefined || text === undefined) {
    if (wanted) {
      throw new ConfigError(
        TEMPORAL_PROFILE_ENV,
        `names profile ${describeValue(TEMPORAL_PROFILE_ENV, wanted)}, but there is no config file to read it from ` +
          `(set ${TEMPORAL_CONFIG_FILE_ENV}${file ? `, or create ${file}` : ''})`,
      );
    }
    return undefined;
  }
  const label = namedFile !== undefined ? TEMPORAL_CONFIG_FILE_ENV : file;
  const profiles = parseProfiles(text, label);
  const name = wanted ?? DEFAULT_PROFILE;
  if (!Object.hasOwn(profiles, name)) {
    if (!wanted) return undefined;
    const names = Object.keys(profiles);
    const where = namedFile !== undefined ? `the file named by ${TEMPORAL_CONFIG_FILE_ENV}` : file;
    throw new ConfigError(
      TEMPORAL_PROFILE_ENV,
      `there is no profile ${describeValue(TEMPORAL_PROFILE_ENV, wanted)} in ${where} ` +
        `(${names.length > 0 ? `profiles: ${names.join(', ')}` : 'it has no profiles'})`,
    );
  }
  return { name, label, text };
}

/** The file's text; undefined when a file at the standard location does not exist (it need not). */
function readConfigFile(file: string, named: boolean): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    if (!named && code === 'ENOENT') return undefined;
    throw new ConfigError(
      TEMPORAL_CONFIG_FILE_ENV,
      named ? unreadableFile(file, code) : `not set, and the config file ${file} cannot be read (${code})`,
    );
  }
}

/** `label` names the file in messages (see {@link LoadedProfile.label}). */
function parseProfiles(text: string, label: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  let profiles: unknown;
  try {
    profiles = loadClientConfig({ configSource: { data: text } }).profiles;
  } catch (err) {
    // envconfig fails this way on valid TOML without a `profile` table: a file with no profiles.
    if (err instanceof TypeError) return {};
    throw new ConfigError(label, `not a valid Temporal config file: ${describeParseError(err)}`);
  }
  for (const [name, profile] of Object.entries(profiles as Record<string, unknown>)) {
    if (typeof profile !== 'object' || profile === null || Array.isArray(profile)) {
      throw new ConfigError(label, `profile.${name} must be a table ([profile.${name}])`);
    }
  }
  return profiles as Record<string, unknown>;
}

/**
 * The parser's reason and position only: its message goes on to quote the offending lines, which may hold a key.
 */
function describeParseError(err: unknown): string {
  const { message, line, column } = err as { message?: unknown; line?: unknown; column?: unknown };
  const first = typeof message === 'string' ? message.split('\n')[0] : undefined;
  const reason = (first && !looksLikeSecret(first) ? first : undefined) || 'unreadable';
  return typeof line === 'number' && typeof column === 'number' ? `${reason} (line ${line}, column ${column})` : reason;
}

function blankToUndefined(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
