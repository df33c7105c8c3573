import { distance } from 'fastest-levenshtein';
import { API_KEY_ENV, API_KEY_FILE_ENV } from '../api/api-key';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { CODEC_TOKEN_ENV, PAYLOAD_KEY_ENV, PAYLOAD_KEY_FILE_ENV } from './codec-config';
import { PAYLOAD_COMPRESSION_ENV } from './compression-config';
import type { Env } from './env';
import { ALLOW_INSECURE_HTTP_ENV } from './insecure-http';
import { IMAGEBATCH_HOME_ENV, IMAGEBATCH_LOCAL_ENV } from './local-config';
import { LOG_LEVEL_ENV } from './log-level';
import { METRICS_ADDRESS_ENV } from './metrics-config';
import { looksLikeSecret } from './redact';
import { SERVICE_CONFIG_ENV } from './service-config';
import { WORKER_ENV } from './temporal-config';
import { TEMPORAL_CLI_ENV, TEMPORAL_TEST_SERVER_ENV } from './toolchain-config';

/**
 * Every `IMAGEGEN_*` and `IMAGEBATCH_*` name imagebatch knows. Any other such variable stops the worker and every
 * command at start, naming it: a typo, or a setting of another version, would otherwise be ignored in silence and
 * leave its user believing it set. test/repo/setting-names.test.ts finds every such name of the repository here.
 */

/** The settings, from the tables and loaders that read them; the only names offered for a misspelt one. */
export const SETTING_NAMES: readonly string[] = [
  ...Object.values(SERVICE_CONFIG_ENV),
  ...Object.values(WORKER_ENV),
  API_KEY_ENV,
  API_KEY_FILE_ENV,
  ALLOW_INSECURE_HTTP_ENV,
  PAYLOAD_KEY_ENV,
  PAYLOAD_KEY_FILE_ENV,
  PAYLOAD_COMPRESSION_ENV,
  CODEC_TOKEN_ENV,
  LOG_LEVEL_ENV,
  METRICS_ADDRESS_ENV,
  TEMPORAL_CLI_ENV,
  TEMPORAL_TEST_SERVER_ENV,
  IMAGEBATCH_LOCAL_ENV,
  IMAGEBATCH_HOME_ENV,
  // src/ledger/location.ts reads these two, from a layer that src/config does not import.
  'IMAGEBATCH_LEDGER',
  'IMAGEBATCH_LEDGER_PASSWORD_FILE',
];

/**
 * Names that only the project's tests, scripts, docker-compose.yml and CI read: known, since a developer's shell or
 * the test harness may hold them, but never offered for a misspelt name.
 */
export const PROJECT_NAMES: readonly string[] = [
  'IMAGEBATCH_TEST_PROJECT', // vitest.config.mts, for its unit projects
  'IMAGEBATCH_TEST_CLUSTER', // npm run test:cluster
  'IMAGEBATCH_FUZZ_SCALE', // test/fuzz
  'IMAGEBATCH_SPEND_CAP_SEED', // test/integration/spend-cap.property.test.ts
  'IMAGEBATCH_HISTORIES_DIR', // test/replay/record-histories.ts
  'IMAGEBATCH_CHROMIUM', // the browser test (docs/toolchain.md)
  'IMAGEBATCH_DOCKER_COMPOSE', // the Compose tests (docs/toolchain.md)
  'IMAGEBATCH_UI_PORT', // docker-compose.yml (docs/deploying.md), as are the next two
  'IMAGEBATCH_TEMPORAL_PORT',
  'IMAGEGEN_API_KEY_SECRET_FILE',
];

/** Ours by its prefix (compared in upper case). */
const OURS = /^(?:IMAGEGEN|IMAGEBATCH)_/;

/** At most this many edits apart, and at most one edit in three characters of the name after its prefix. */
const MAX_EDITS = 3;

/**
 * The names in `env` that look like ours (`IMAGEGEN_` or `IMAGEBATCH_`, in any case) and are none of the known, with
 * a value that is not blank (a blank one sets nothing: Compose blanks a variable it cannot remove). Windows reads
 * variables whatever their case, so there a name known in another case is known.
 */
export function unknownSettings(env: Env, platform: NodeJS.Platform = process.platform): string[] {
  const known = new Set([...SETTING_NAMES, ...PROJECT_NAMES]);
  const spelt = (name: string) => (platform === 'win32' ? name.toUpperCase() : name);
  return Object.keys(env)
    .filter((name) => OURS.test(name.toUpperCase()) && env[name]?.trim() && !known.has(spelt(name)))
    .sort();
}

/** `name` without its prefix. */
const rest = (name: string) => name.replace(OURS, '');

/**
 * The setting `name` is most likely a typo of, or undefined when none is near: edits on the whole name, or on the
 * part after the prefix plus one (a setting's name under the other prefix is a typo of it). A name nearest to one of
 * {@link PROJECT_NAMES} gets none.
 */
export function nearestSetting(name: string): string | undefined {
  const upper = name.toUpperCase();
  let best: { name: string; edits: number } | undefined;
  // Settings first, so that a setting wins a tie.
  for (const known of [...SETTING_NAMES, ...PROJECT_NAMES]) {
    const edits = Math.min(distance(upper, known), distance(rest(upper), rest(known)) + 1);
    if (!best || edits < best.edits) best = { name: known, edits };
  }
  if (best === undefined || best.edits > Math.min(MAX_EDITS, rest(upper).length / 3)) return undefined;
  return SETTING_NAMES.includes(best.name) ? best.name : undefined;
}

/** Variables of ours that imagebatch does not know; the message names each and the setting it may be a typo of. */
export class UnknownSettingError extends ImagebatchError {
  readonly code = ErrorCode.SettingUnknown;
  constructor(readonly names: readonly string[]) {
    super(unknownSettingsMessage(names));
  }
}

/** The name, unless it looks like a key (an env file's line `NAME key` may make such a name). */
function shown(name: string): string {
  return looksLikeSecret(name) ? `<a name of ${name.length} characters, not shown>` : name;
}

/** ` (did you mean NAME?)`, or nothing. */
function typoOf(name: string): string {
  const near = nearestSetting(name);
  return near ? ` (did you mean ${near}?)` : '';
}

function unknownSettingsMessage(names: readonly string[]): string {
  const [only] = names;
  if (names.length === 1 && only !== undefined) {
    return `${shown(only)} is not a setting of imagebatch${typoOf(only)}: unset it or correct its name`;
  }
  const described = names.map((name) => `${shown(name)}${typoOf(name)}`);
  const list = `${described.slice(0, -1).join(', ')} and ${described.at(-1)}`;
  return `${list} are not settings of imagebatch: unset them or correct their names`;
}

/**
 * Throws an {@link UnknownSettingError} when `env` holds a variable of ours that imagebatch does not know. The worker
 * and every command call it at start, before they read any setting.
 */
export function checkKnownSettings(env: Env, platform: NodeJS.Platform = process.platform): void {
  const unknown = unknownSettings(env, platform);
  if (unknown.length > 0) throw new UnknownSettingError(unknown);
}

/**
 * The files that the `*_FILE` settings of `env` name (the API key's, the payload key's, the ledger password's...):
 * paths only, never their content. A schedule's source may never be one of them.
 */
export function secretFilePaths(env: Env = process.env): string[] {
  return [...SETTING_NAMES, ...PROJECT_NAMES]
    .filter((name) => name.endsWith('_FILE'))
    .flatMap((name) => {
      const value = env[name]?.trim();
      return value ? [value] : [];
    });
}
