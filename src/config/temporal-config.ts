import { accessSync, constants } from 'node:fs';
import { loadClientConfigProfile, toClientOptions, type ClientConfigProfile } from '@temporalio/envconfig';
import { z } from 'zod';
import { durationMs } from './duration';
import { describeValue, gotValue, unreadableFile, withoutValue } from './redact';
import { ConfigError } from './service-config';
import { loadTemporalProfile } from './temporal-profile';

/**
 * Where the worker and the CLI find Temporal, and how the worker runs. The connection is `@temporalio/envconfig`'s,
 * as in every Temporal SDK and the `temporal` CLI: a profile of Temporal's client config file (`TEMPORAL_CONFIG_FILE`,
 * `TEMPORAL_PROFILE`; chosen and read by ./temporal-profile) with each standard variable, when set, replacing its
 * field (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`). An API key or any TLS
 * setting turns TLS on unless `TEMPORAL_TLS=false` or the profile's `tls.disabled` turns it off. The rest of the
 * connection, `apiKey`, `tls` and `grpcMeta`, is envconfig's {@link ClientConfigProfile}.
 */
export interface TemporalConfig extends ClientConfigProfile {
  /**
   * Front-end address, `host:port`.
   * @default DEFAULT_TEMPORAL_ADDRESS
   */
  address: string;
  /** @default 'default' */
  namespace: string;
  /**
   * Where `address` came from: `TEMPORAL_ADDRESS`, or the profile (`profile "<name>" in <file>`); undefined when nothing
   * names one, which is local mode for the CLI (src/local) and {@link DEFAULT_TEMPORAL_ADDRESS} for `imagebatch worker`.
   * @default undefined
   */
  addressFrom?: string;
  /**
   * `TEMPORAL_TASK_QUEUE` (not part of a profile).
   * @default 'imagebatch'
   */
  taskQueue: string;
  /**
   * Activity tasks per second across every worker of the task queue: the per-key request rate of the image
   * service, enforced by the Temporal server for all workers together. `IMAGEBATCH_RATE_LIMIT`; 0 = none.
   * @default 0
   */
  ratePerSecond: number;
  /**
   * Activities one worker runs at once. `IMAGEBATCH_MAX_CONCURRENT_ACTIVITIES`.
   * @default 100
   */
  maxConcurrentActivities: number;
  /**
   * Milliseconds a stopping worker (SIGINT/SIGTERM) waits for the activities it runs to finish before cancelling
   * them, to be retried by another worker. `IMAGEBATCH_SHUTDOWN_GRACE`, a duration such as `50s`; `0s` cancels at
   * once. A container's stop timeout must be longer (docker-compose.yml's `stop_grace_period`).
   * @default DEFAULT_SHUTDOWN_GRACE_MS
   */
  shutdownGraceMs: number;
  /**
   * Workflows one worker keeps cached (Temporal's sticky cache): a cached workflow continues from where it stopped,
   * an evicted one is replayed from its history at its next task. `IMAGEBATCH_MAX_CACHED_WORKFLOWS`; `0` turns the
   * cache off (every task replays).
   * @default the SDK's, which grows with the heap limit (about 2,300 with Node's 4 GB heap)
   */
  maxCachedWorkflows?: number;
}

/** The variables of ours among the worker's Temporal settings, by their field of {@link TemporalConfig}. */
export const WORKER_ENV = {
  ratePerSecond: 'IMAGEBATCH_RATE_LIMIT',
  maxConcurrentActivities: 'IMAGEBATCH_MAX_CONCURRENT_ACTIVITIES',
  shutdownGraceMs: 'IMAGEBATCH_SHUTDOWN_GRACE',
  maxCachedWorkflows: 'IMAGEBATCH_MAX_CACHED_WORKFLOWS',
} as const satisfies Partial<Record<keyof TemporalConfig, string>>;

/** The address `imagebatch worker` connects to when nothing names one. */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';

/**
 * The worker's shutdown grace when `IMAGEBATCH_SHUTDOWN_GRACE` is unset: an activity sends at most one request, so a
 * few seconds let most of those in flight finish, and 8 s fits inside Docker's default 10 s between SIGTERM and
 * SIGKILL.
 */
export const DEFAULT_SHUTDOWN_GRACE_MS = 8_000;

/** The largest `IMAGEBATCH_MAX_CACHED_WORKFLOWS`. */
const MAX_CACHED_WORKFLOWS = 100_000;

/** The longest `IMAGEBATCH_SHUTDOWN_GRACE`. */
const MAX_SHUTDOWN_GRACE_MS = 3_600_000;

type Env = Readonly<Record<string, string | undefined>>;

const bool = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no']))
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/**
 * Validates one value; the message names where it came from (`source`) and quotes the value unless it may be a
 * secret: `name` (the variable, or the profile field such as `api_key`) decides with the value's look
 * (src/config/redact.ts).
 */
function check<T>(schema: z.ZodType<T>, value: unknown, source: string, name = source): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const problem = withoutValue(parsed.error.issues.map((i) => i.message).join('; '), value);
    throw new ConfigError(source, `${problem}${gotValue(name, value)}`);
  }
  return parsed.data;
}

/** One of our variables (not envconfig's), validated; undefined when unset (`env` holds no blank values). */
function read<T>(env: Env, name: string, schema: z.ZodType<T>): T | undefined {
  const raw = env[name];
  return raw === undefined ? undefined : check(schema, raw, name);
}

const nonEmpty = z.string().trim().min(1, 'must not be empty');
const number = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+(\.\d+)?$/, 'must be a number')
    .transform(Number)
    .pipe(z.number().min(min).max(max));
const shutdownGrace = z
  .string()
  .transform(durationMs)
  .refine(
    (v) => v >= 0 && v <= MAX_SHUTDOWN_GRACE_MS,
    'must be a duration of at most 1h with its unit, such as 8s, 50s or 2m (0s: cancel at once)',
  );
const cachedWorkflows = z
  .string()
  .trim()
  .regex(/^\d+$/, 'must be a whole number')
  .transform(Number)
  .refine(
    (v) => v === 0 || (v >= 2 && v <= MAX_CACHED_WORKFLOWS),
    `must be 0 (no cache) or from 2 to ${MAX_CACHED_WORKFLOWS}`,
  );
const hostPort = z
  .string()
  .trim()
  .regex(/^[^\s/:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/, 'must be host:port, such as 127.0.0.1:7233');

const GRPC_META = 'TEMPORAL_GRPC_META_';
/** The PEMs of a profile: envconfig's field, the variables' infix, the profile's key. */
const PEMS = [
  ['clientCert', 'CLIENT_CERT', 'client_cert'],
  ['clientKey', 'CLIENT_KEY', 'client_key'],
  ['serverCACert', 'SERVER_CA_CERT', 'server_ca_cert'],
] as const;

/** Reads the Temporal settings; a wrong value throws a ConfigError naming its variable or file (never a key). */
export function loadTemporalConfig(given: Env = process.env): TemporalConfig {
  // Ours, not envconfig's: a blank variable counts as unset, because a Compose override file cannot remove one that
  // the base file sets (docs/deploying.md relies on it). A blank gRPC header still removes the profile's header.
  const env = Object.fromEntries(
    Object.entries(given).filter(([name, value]) => value === undefined || name.startsWith(GRPC_META) || value.trim()),
  );
  const file = loadTemporalProfile(env);
  const at = (key: string) => (file ? `${file.label} profile.${file.name}.${key}` : key);
  /** Checks a value of the merged profile; the message names the variable when it is set (it won), else the key. */
  const field = <T>(value: unknown, variable: string, key: string, schema: z.ZodType<T>) => {
    return env[variable] === undefined ? check(schema, value, at(key), key) : check(schema, value, variable);
  };

  if (read(env, 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION', bool)) {
    throw new ConfigError(
      'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
      "the TypeScript SDK always verifies the server's certificate; set TEMPORAL_TLS_SERVER_NAME to the name it holds",
    );
  }
  const overrides: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    // gRPC headers are applied below, not by envconfig.
    if (value !== undefined && !name.startsWith(GRPC_META)) overrides[name] = value;
  }
  // envconfig takes `1` and `true` for on and anything else for off: TEMPORAL_TLS=yes, TRUE or a blank value would
  // turn TLS off and send the API key in clear. Ours accepts the usual spellings and rejects the rest.
  if (env.TEMPORAL_TLS !== undefined) overrides.TEMPORAL_TLS = String(check(bool, env.TEMPORAL_TLS, 'TEMPORAL_TLS'));
  for (const [, infix] of PEMS) {
    const prefix = `TEMPORAL_TLS_${infix}`;
    if (env[`${prefix}_PATH`] !== undefined && env[`${prefix}_DATA`] !== undefined) {
      throw new ConfigError(`${prefix}_PATH`, `set only one of ${prefix}_PATH and ${prefix}_DATA`);
    }
  }

  let profile: ClientConfigProfile;
  try {
    profile = loadClientConfigProfile({
      ...(file ? { configSource: { data: file.text }, profile: file.name } : { disableFile: true }),
      overrideEnvVars: overrides,
    });
  } catch (err) {
    // A PEM's path in the profile and its data in the environment, or the reverse (envconfig's message quotes no
    // value): the variable does not replace the profile's other field.
    const message = err instanceof Error ? (err.message.split('\n')[0] ?? '') : String(err);
    throw new ConfigError(file?.label ?? 'TEMPORAL_TLS', `${message} (from the profile and a TEMPORAL_TLS_* variable)`);
  }

  const { address, namespace, apiKey, tls, grpcMeta } = profile;
  if (tls?.disabled !== undefined) field(tls.disabled, 'TEMPORAL_TLS', 'tls.disabled', z.boolean());
  if (tls?.serverName !== undefined) field(tls.serverName, 'TEMPORAL_TLS_SERVER_NAME', 'tls.server_name', nonEmpty);
  for (const [pem, infix, key] of PEMS) {
    const source = tls?.[pem];
    if (source && 'path' in source) {
      const variable = `TEMPORAL_TLS_${infix}_PATH`;
      const fromEnv = env[variable] !== undefined;
      checkReadable(
        field(source.path, variable, `tls.${key}_path`, nonEmpty),
        fromEnv ? variable : at(`tls.${key}_path`),
        fromEnv ? `TEMPORAL_TLS_${infix}_DATA` : `tls.${key}_data`,
      );
    }
  }
  if ((tls?.clientCert === undefined) !== (tls?.clientKey === undefined)) {
    throw new ConfigError(
      tls?.clientCert ? 'TEMPORAL_TLS_CLIENT_KEY_PATH' : 'TEMPORAL_TLS_CLIENT_CERT_PATH',
      `mTLS needs both the client certificate and its key (the ${tls?.clientCert ? 'key' : 'certificate'} is missing)`,
    );
  }
  const cache = read(env, WORKER_ENV.maxCachedWorkflows, cachedWorkflows);
  return {
    ...profile,
    address: address === undefined ? DEFAULT_TEMPORAL_ADDRESS : field(address, 'TEMPORAL_ADDRESS', 'address', hostPort),
    ...(address === undefined
      ? {}
      : {
          addressFrom:
            env.TEMPORAL_ADDRESS !== undefined
              ? 'TEMPORAL_ADDRESS'
              : `profile ${describeValue('TEMPORAL_PROFILE', file?.name)} in ${file?.label}`,
        }),
    namespace: namespace === undefined ? 'default' : field(namespace, 'TEMPORAL_NAMESPACE', 'namespace', nonEmpty),
    ...(apiKey === undefined ? {} : { apiKey: field(apiKey, 'TEMPORAL_API_KEY', 'api_key', nonEmpty) }),
    grpcMeta: grpcHeaders(env, grpcMeta, at),
    taskQueue: read(env, 'TEMPORAL_TASK_QUEUE', nonEmpty) ?? 'imagebatch',
    ratePerSecond: read(env, WORKER_ENV.ratePerSecond, number(0, 100_000)) ?? 0,
    maxConcurrentActivities: read(env, WORKER_ENV.maxConcurrentActivities, number(1, 10_000)) ?? 100,
    shutdownGraceMs: read(env, WORKER_ENV.shutdownGraceMs, shutdownGrace) ?? DEFAULT_SHUTDOWN_GRACE_MS,
    ...(cache === undefined ? {} : { maxCachedWorkflows: cache }),
  };
}

/** The file must be readable; its name is never printed (it may be the PEM itself, put where a path belongs). */
function checkReadable(file: string, source: string, instead: string): void {
  try {
    accessSync(file, constants.R_OK);
  } catch (err) {
    throw new ConfigError(source, unreadableFile(file, (err as NodeJS.ErrnoException).code ?? 'error', instead));
  }
}

/**
 * gRPC headers: the profile's `grpc_meta`, then `TEMPORAL_GRPC_META_<NAME>` (an empty value removes one), with `_`
 * in a name turned into `-`. Ours, not envconfig's: envconfig 1.24 turns only the first `_` of a name into `-`,
 * so its removal misses a profile's `tenant_id` and a header that should be gone (a token, say) is still sent.
 */
function grpcHeaders(
  env: Env,
  fromProfile: Record<string, string> | undefined,
  at: (key: string) => string,
): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  const header = (name: string) => name.toLowerCase().replace(/_/g, '-');
  for (const [name, value] of Object.entries(fromProfile ?? {})) {
    headers[header(name)] = check(z.string(), value, at(`grpc_meta.${name}`), `grpc_meta.${name}`);
  }
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(GRPC_META) || value === undefined) continue;
    const name = header(variable.slice(GRPC_META.length));
    if (value === '') delete headers[name];
    else headers[name] = value;
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/** Options for `Connection.connect` / `NativeConnection.connect` (envconfig's `toClientOptions`); reads the PEMs. */
export function connectionOptions(config: TemporalConfig) {
  return toClientOptions(config).connectionOptions;
}
