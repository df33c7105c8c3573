import { createHash, randomBytes } from 'node:crypto';

type Env = Readonly<Record<string, string | undefined>>;

/** The variables the worker reads besides Temporal's address: the image service's, the payload keys, its limits. */
const WORKER_VARIABLES = [
  'IMAGEBATCH_PAYLOAD_KEY',
  'IMAGEBATCH_PAYLOAD_KEY_FILE',
  'IMAGEBATCH_RATE_LIMIT',
  'IMAGEBATCH_MAX_CONCURRENT_ACTIVITIES',
  'IMAGEBATCH_SHUTDOWN_GRACE',
  'IMAGEBATCH_MAX_CACHED_WORKFLOWS',
  'IMAGEBATCH_LEDGER',
  'IMAGEBATCH_LEDGER_PASSWORD_FILE',
  'XDG_DATA_HOME',
  'TEMPORAL_TASK_QUEUE',
];

/** The names of the worker's variables set in `env` (every `IMAGEGEN_*` and those above), sorted. */
export function workerVariables(env: Env): string[] {
  return Object.keys(env)
    .filter((name) => (name.startsWith('IMAGEGEN_') || WORKER_VARIABLES.includes(name)) && env[name]?.trim())
    .sort();
}

/** Salted hashes of the worker's settings in `env`: enough to tell two settings apart, never to read one back. */
export interface SettingsPrint {
  salt: string;
  hashes: Record<string, string>;
}

export function settingsPrint(env: Env, salt = randomBytes(16).toString('hex')): SettingsPrint {
  const hash = (name: string, value: string) =>
    createHash('sha256').update(`${salt}\0${name}\0${value}`).digest('hex').slice(0, 32);
  return { salt, hashes: Object.fromEntries(workerVariables(env).map((name) => [name, hash(name, env[name]!)])) };
}

/** The variables whose values differ between a running worker's settings and `env` (set in one and not the other too). */
export function differingSettings(running: SettingsPrint, env: Env): string[] {
  const here = settingsPrint(env, running.salt).hashes;
  const names = new Set([...Object.keys(running.hashes), ...Object.keys(here)]);
  return [...names].filter((name) => running.hashes[name] !== here[name]).sort();
}
