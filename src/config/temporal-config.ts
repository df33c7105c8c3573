import { accessSync, constants, readFileSync } from 'node:fs';
import type { ConfigDataSource } from '@temporalio/envconfig';
import { z } from 'zod';
import { gotValue, unreadableFile, withoutValue } from './redact';
import { ConfigError } from './service-config';
import { loadTemporalProfile, type LoadedProfile } from './temporal-profile';

/**
 * Where the worker and the CLI find Temporal, and how the worker runs. The connection comes from a profile of
 * Temporal's client config file (`TEMPORAL_CONFIG_FILE`, `TEMPORAL_PROFILE`) when there is one, and each standard
 * environment variable overrides its field, as in every Temporal SDK and the `temporal` CLI.
 */
export interface TemporalConfig {
  /**
   * Front-end address. `TEMPORAL_ADDRESS`, profile `address`.
   * @default '127.0.0.1:7233'
   */
  address: string;
  /**
   * `TEMPORAL_NAMESPACE`, profile `namespace`.
   * @default 'default'
   */
  namespace: string;
  /**
   * `TEMPORAL_TASK_QUEUE` (not part of a profile).
   * @default 'imagebatch'
   */
  taskQueue: string;
  /** Temporal Cloud API key: `TEMPORAL_API_KEY`, profile `api_key`. Turns TLS on unless TLS is disabled explicitly. */
  apiKey?: string;
  /** TLS settings; present means TLS is on (with the system's roots when empty). */
  tls?: TemporalTlsConfig;
  /** gRPC headers sent with every call: profile `grpc_meta`, `TEMPORAL_GRPC_META_<NAME>` (empty removes one). */
  grpcMetadata?: Record<string, string>;
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
}

/** TLS and mTLS. Each PEM is a file (`{ path }`, checked to be readable at load) or the PEM itself (`{ data }`). */
export interface TemporalTlsConfig {
  /** Client certificate for mTLS: `TEMPORAL_TLS_CLIENT_CERT_PATH` / `_DATA`, profile `tls.client_cert_path` / `_data`. */
  clientCert?: ConfigDataSource;
  /** Its private key: `TEMPORAL_TLS_CLIENT_KEY_PATH` / `_DATA`, profile `tls.client_key_path` / `_data`. */
  clientKey?: ConfigDataSource;
  /** CA of a server whose certificate the system does not trust: `TEMPORAL_TLS_SERVER_CA_CERT_PATH` / `_DATA`. */
  serverCaCert?: ConfigDataSource;
  /** Name to check the server's certificate against: `TEMPORAL_TLS_SERVER_NAME`, profile `tls.server_name`. */
  serverName?: string;
}

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

/** An environment variable's value, validated; undefined when unset or blank. */
function read<T>(env: Env, name: string, schema: z.ZodType<T>): T | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? undefined : check(schema, raw, name);
}

const nonEmpty = z.string().trim().min(1);
const number = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+(\.\d+)?$/, 'must be a number')
    .transform(Number)
    .pipe(z.number().min(min).max(max));
const hostPort = z
  .string()
  .trim()
  .regex(/^[^\s/:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/, 'must be host:port, such as 127.0.0.1:7233');

/** Reads the Temporal settings; a wrong value throws a ConfigError naming its variable or file (never a key). */
export function loadTemporalConfig(env: Env = process.env): TemporalConfig {
  const profile = loadTemporalProfile(env);
  const p = profile?.settings ?? {};
  const at = (key: string) => (profile ? `${profile.label} profile.${profile.name}.${key}` : key);
  const fromProfile = <T>(key: string, value: unknown, schema: z.ZodType<T>) =>
    value === undefined ? undefined : check(schema, value, at(key), key);

  const apiKey = read(env, 'TEMPORAL_API_KEY', nonEmpty) ?? fromProfile('api_key', p.apiKey, nonEmpty);
  const tls = loadTls(env, profile, at, apiKey !== undefined);
  const grpcMetadata = loadGrpcMetadata(env, p.grpcMeta, at);
  return {
    address: read(env, 'TEMPORAL_ADDRESS', hostPort) ?? fromProfile('address', p.address, hostPort) ?? '127.0.0.1:7233',
    namespace:
      read(env, 'TEMPORAL_NAMESPACE', nonEmpty) ?? fromProfile('namespace', p.namespace, nonEmpty) ?? 'default',
    taskQueue: read(env, 'TEMPORAL_TASK_QUEUE', nonEmpty) ?? 'imagebatch',
    ...(apiKey ? { apiKey } : {}),
    ...(tls ? { tls } : {}),
    ...(grpcMetadata ? { grpcMetadata } : {}),
    ratePerSecond: read(env, 'IMAGEBATCH_RATE_LIMIT', number(0, 100_000)) ?? 0,
    maxConcurrentActivities: read(env, 'IMAGEBATCH_MAX_CONCURRENT_ACTIVITIES', number(1, 10_000)) ?? 100,
  };
}

/**
 * TLS is on when `TEMPORAL_TLS` says so; otherwise when the profile's `tls.disabled` says so; otherwise when there
 * is an API key or any TLS setting. Each setting from the environment replaces the profile's.
 */
function loadTls(
  env: Env,
  profile: LoadedProfile | undefined,
  at: (key: string) => string,
  hasApiKey: boolean,
): TemporalTlsConfig | undefined {
  if (read(env, 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION', bool)) {
    throw new ConfigError(
      'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
      "the TypeScript SDK always verifies the server's certificate; set TEMPORAL_TLS_SERVER_NAME to the name it holds",
    );
  }
  const p = profile?.settings.tls;
  const pem = (name: string, key: string, fromProfile: ConfigDataSource | undefined) =>
    pemFromEnv(env, `TEMPORAL_TLS_${name}`) ?? checkPem(fromProfile, at(`tls.${key}`), `tls.${key}`);
  const tls: TemporalTlsConfig = {};
  const clientCert = pem('CLIENT_CERT', 'client_cert', p?.clientCert);
  const clientKey = pem('CLIENT_KEY', 'client_key', p?.clientKey);
  const serverCaCert = pem('SERVER_CA_CERT', 'server_ca_cert', p?.serverCACert);
  const serverName =
    read(env, 'TEMPORAL_TLS_SERVER_NAME', nonEmpty) ??
    (p?.serverName === undefined ? undefined : check(nonEmpty, p.serverName, at('tls.server_name'), 'tls.server_name'));
  if (clientCert) tls.clientCert = clientCert;
  if (clientKey) tls.clientKey = clientKey;
  if (serverCaCert) tls.serverCaCert = serverCaCert;
  if (serverName) tls.serverName = serverName;
  if ((clientCert === undefined) !== (clientKey === undefined)) {
    throw new ConfigError(
      clientCert ? 'TEMPORAL_TLS_CLIENT_KEY_PATH' : 'TEMPORAL_TLS_CLIENT_CERT_PATH',
      `mTLS needs both the client certificate and its key (the ${clientCert ? 'key' : 'certificate'} is missing)`,
    );
  }
  const flag = read(env, 'TEMPORAL_TLS', bool);
  const profileFlag =
    p?.disabled === undefined ? undefined : !check(z.boolean(), p.disabled, at('tls.disabled'), 'tls.disabled');
  const on = flag ?? profileFlag ?? (hasApiKey || p !== undefined || Object.keys(tls).length > 0);
  return on ? tls : undefined;
}

/** `<PREFIX>_PATH` (a readable file) or `<PREFIX>_DATA` (the PEM), not both. */
function pemFromEnv(env: Env, prefix: string): ConfigDataSource | undefined {
  const file = read(env, `${prefix}_PATH`, nonEmpty);
  const data = read(env, `${prefix}_DATA`, nonEmpty);
  if (file !== undefined && data !== undefined) {
    throw new ConfigError(`${prefix}_PATH`, `set only one of ${prefix}_PATH and ${prefix}_DATA`);
  }
  if (data !== undefined) return { data };
  return file === undefined ? undefined : checkReadable(file, `${prefix}_PATH`, `${prefix}_DATA`);
}

/** A PEM of the profile; `where` names it in messages, `key` is its field (`tls.client_key`). */
function checkPem(source: ConfigDataSource | undefined, where: string, key: string): ConfigDataSource | undefined {
  if (source === undefined) return undefined;
  if (!('path' in source)) return source;
  return checkReadable(check(nonEmpty, source.path, `${where}_path`, `${key}_path`), `${where}_path`, `${key}_data`);
}

/** The file must be readable; its name is never printed (it may be the PEM itself, put where a path belongs). */
function checkReadable(file: string, source: string, instead: string): ConfigDataSource {
  try {
    accessSync(file, constants.R_OK);
  } catch (err) {
    throw new ConfigError(source, unreadableFile(file, (err as NodeJS.ErrnoException).code ?? 'error', instead));
  }
  return { path: file };
}

function loadGrpcMetadata(
  env: Env,
  fromProfile: Record<string, string> | undefined,
  at: (key: string) => string,
): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(fromProfile ?? {})) {
    headers[name] = check(z.string(), value, at(`grpc_meta.${name}`), `grpc_meta.${name}`);
  }
  const prefix = 'TEMPORAL_GRPC_META_';
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(prefix) || value === undefined) continue;
    const name = variable.slice(prefix.length).toLowerCase().replace(/_/g, '-');
    if (value === '') delete headers[name];
    else headers[name] = value;
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/** Connection options for `Connection.connect` / `NativeConnection.connect`; reads the PEM files. */
export function connectionOptions(config: TemporalConfig) {
  const t = config.tls;
  const tls = t
    ? {
        ...(t.serverName ? { serverNameOverride: t.serverName } : {}),
        ...(t.serverCaCert ? { serverRootCACertificate: pemBytes(t.serverCaCert) } : {}),
        ...(t.clientCert && t.clientKey
          ? { clientCertPair: { crt: pemBytes(t.clientCert), key: pemBytes(t.clientKey) } }
          : {}),
      }
    : undefined;
  return {
    address: config.address,
    ...(tls ? { tls } : {}),
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    ...(config.grpcMetadata ? { metadata: { ...config.grpcMetadata } } : {}),
  };
}

function pemBytes(source: ConfigDataSource): Uint8Array {
  if ('path' in source) return readFileSync(source.path);
  return typeof source.data === 'string' ? Buffer.from(source.data) : source.data;
}
