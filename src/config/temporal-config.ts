import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from './service-config';

/** Where the worker and the CLI find Temporal, and how the worker runs. From the standard Temporal variables. */
export interface TemporalConfig {
  /**
   * Front-end address. `TEMPORAL_ADDRESS`.
   * @default '127.0.0.1:7233'
   */
  address: string;
  /**
   * `TEMPORAL_NAMESPACE`.
   * @default 'default'
   */
  namespace: string;
  /**
   * `TEMPORAL_TASK_QUEUE`.
   * @default 'imagebatch'
   */
  taskQueue: string;
  /** Temporal Cloud API key. `TEMPORAL_API_KEY` (implies TLS). */
  apiKey?: string;
  /** TLS: `TEMPORAL_TLS=true`, or client certificate files for mTLS. */
  tls?: { clientCertPath?: string; clientKeyPath?: string; serverCaCertPath?: string; serverName?: string };
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

const bool = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no']))
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

function read<T>(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  schema: z.ZodType<T>,
  fallback?: string,
) {
  const raw = env[name];
  const value = raw === undefined || raw.trim() === '' ? fallback : raw;
  if (value === undefined) return undefined;
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const detail = name.includes('KEY') ? '' : ` (got ${JSON.stringify(value)})`;
    throw new ConfigError(name, `${parsed.error.issues.map((i) => i.message).join('; ')}${detail}`);
  }
  return parsed.data;
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

/** Reads the Temporal settings; a wrong value throws a ConfigError naming its variable (never printing a key). */
export function loadTemporalConfig(env: Readonly<Record<string, string | undefined>> = process.env): TemporalConfig {
  const apiKey = read(env, 'TEMPORAL_API_KEY', nonEmpty);
  const clientCertPath = read(env, 'TEMPORAL_TLS_CLIENT_CERT_PATH', nonEmpty);
  const clientKeyPath = read(env, 'TEMPORAL_TLS_CLIENT_KEY_PATH', nonEmpty);
  const serverCaCertPath = read(env, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', nonEmpty);
  const serverName = read(env, 'TEMPORAL_TLS_SERVER_NAME', nonEmpty);
  const tlsFlag = read(env, 'TEMPORAL_TLS', bool);
  if ((clientCertPath === undefined) !== (clientKeyPath === undefined)) {
    throw new ConfigError(
      clientCertPath ? 'TEMPORAL_TLS_CLIENT_KEY_PATH' : 'TEMPORAL_TLS_CLIENT_CERT_PATH',
      'mTLS needs both the client certificate and its key',
    );
  }
  const tlsWanted = tlsFlag ?? (apiKey !== undefined || clientCertPath !== undefined);
  return {
    address: read(env, 'TEMPORAL_ADDRESS', hostPort, '127.0.0.1:7233')!,
    namespace: read(env, 'TEMPORAL_NAMESPACE', nonEmpty, 'default')!,
    taskQueue: read(env, 'TEMPORAL_TASK_QUEUE', nonEmpty, 'imagebatch')!,
    ...(apiKey ? { apiKey } : {}),
    ...(tlsWanted
      ? {
          tls: {
            ...(clientCertPath ? { clientCertPath } : {}),
            ...(clientKeyPath ? { clientKeyPath } : {}),
            ...(serverCaCertPath ? { serverCaCertPath } : {}),
            ...(serverName ? { serverName } : {}),
          },
        }
      : {}),
    ratePerSecond: read(env, 'IMAGEBATCH_RATE_LIMIT', number(0, 100_000), '0')!,
    maxConcurrentActivities: read(env, 'IMAGEBATCH_MAX_CONCURRENT_ACTIVITIES', number(1, 10_000), '100')!,
  };
}

/** Connection options for `Connection.connect` / `NativeConnection.connect`. */
export function connectionOptions(config: TemporalConfig) {
  const tls = config.tls
    ? {
        ...(config.tls.serverName ? { serverNameOverride: config.tls.serverName } : {}),
        ...(config.tls.serverCaCertPath ? { serverRootCACertificate: readFileSync(config.tls.serverCaCertPath) } : {}),
        ...(config.tls.clientCertPath && config.tls.clientKeyPath
          ? {
              clientCertPair: {
                crt: readFileSync(config.tls.clientCertPath),
                key: readFileSync(config.tls.clientKeyPath),
              },
            }
          : {}),
      }
    : undefined;
  return {
    address: config.address,
    ...(tls ? { tls } : {}),
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
  };
}
