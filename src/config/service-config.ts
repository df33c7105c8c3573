import { z } from 'zod';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { DEFAULT_IDEMPOTENCY_HEADER, DEFAULT_PENDING_STATUSES, DEFAULT_SUCCESS_STATUSES } from '../api/contract';
import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../api/money';
import { POLL_PLAN_MODES, type ServiceConfig } from '../api/service-config';
import path from 'node:path';
import { baseUrl, fieldPaths, headerName, int, onOff, statuses, urlPath } from './setting-schemas';
import * as schemaDefaults from '../api/schemas';
import { ALLOW_INSECURE_HTTP_ENV, plainHttpProblem } from './insecure-http';
import { gotValue, withoutValue } from './redact';
import { DOWNLOAD_ALLOW_HOSTS_ENV, parseAllowList } from '../api/download-guard';

/** Folders a schedule's local source may be in, besides its own output folder (src/activities/schedule-source.ts). */
export const SCHEDULE_SOURCES_ENV = 'IMAGEBATCH_SCHEDULE_SOURCES';
import {
  bodyPathProblem,
  keyFieldClash,
  parseRequestFields,
  parseRequestTemplate,
  templateClash,
} from '../api/request-shape';

/**
 * The image-service client's settings, read from the environment: {@link loadServiceConfig} validates all of them at
 * start-up and names the variable at fault. Their type, `ServiceConfig`, is the client's (src/api/service-config.ts).
 */

/** A configuration value that cannot be used; `variable` names the environment variable. */
export class ConfigError extends ImagebatchError {
  readonly code = ErrorCode.ConfigInvalid;
  constructor(
    readonly variable: string,
    readonly problem: string,
  ) {
    super(`${variable}: ${problem}`);
  }
}

/** Each setting: its environment variable, its schema (from the raw string) and its default. */
const SETTINGS = {
  baseUrl: ['IMAGEGEN_BASE_URL', baseUrl, 'http://127.0.0.1:8787/api/public/v1'],
  submitPath: ['IMAGEGEN_SUBMIT_PATH', urlPath, '/creations'],
  creationPath: [
    'IMAGEGEN_CREATION_PATH',
    urlPath.refine((p) => p.includes('{id}'), 'must contain the placeholder {id}'),
    '/creations/{id}',
  ],
  modelsPath: ['IMAGEGEN_MODELS_PATH', urlPath, '/models'],
  idempotencyHeader: ['IMAGEGEN_IDEMPOTENCY_HEADER', headerName, DEFAULT_IDEMPOTENCY_HEADER],
  idempotencyField: [
    'IMAGEGEN_IDEMPOTENCY_FIELD',
    z
      .string()
      .trim()
      .superRefine((s, ctx) => {
        const problem = s === '' ? undefined : bodyPathProblem(s);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .transform((s) => (s === '' ? undefined : s)),
    '',
  ],
  authHeader: [
    'IMAGEGEN_AUTH_HEADER',
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['bearer', 'x-api-key'])),
    'bearer',
  ],
  successStatuses: ['IMAGEGEN_SUCCESS_STATUSES', statuses, DEFAULT_SUCCESS_STATUSES.join(',')],
  pendingStatuses: ['IMAGEGEN_PENDING_STATUSES', statuses, DEFAULT_PENDING_STATUSES.join(',')],
  costFields: ['IMAGEGEN_COST_FIELDS', fieldPaths, DEFAULT_COST_FIELDS.join(',')],
  priceFields: ['IMAGEGEN_PRICE_FIELDS', fieldPaths, DEFAULT_PRICE_FIELDS.join(',')],
  idFields: ['IMAGEGEN_ID_FIELDS', fieldPaths, schemaDefaults.DEFAULT_ID_FIELDS.join(',')],
  statusFields: ['IMAGEGEN_STATUS_FIELDS', fieldPaths, schemaDefaults.DEFAULT_STATUS_FIELDS.join(',')],
  errorFields: ['IMAGEGEN_ERROR_FIELDS', fieldPaths, schemaDefaults.DEFAULT_ERROR_FIELDS.join(',')],
  imageFields: ['IMAGEGEN_IMAGE_FIELDS', fieldPaths, schemaDefaults.DEFAULT_IMAGE_FIELDS.join(',')],
  imageDiscovery: ['IMAGEGEN_IMAGE_DISCOVERY', onOff, 'on'],
  modelIdFields: ['IMAGEGEN_MODEL_ID_FIELDS', fieldPaths, schemaDefaults.DEFAULT_MODEL_ID_FIELDS.join(',')],
  minPollIntervalMs: ['IMAGEGEN_MIN_POLL_INTERVAL_MS', int(1, 3_600_000), '2000'],
  pollPlan: ['IMAGEGEN_POLL_PLAN', z.string().trim().toLowerCase().pipe(z.enum(POLL_PLAN_MODES)), 'learn'],
  connectTimeoutMs: ['IMAGEGEN_CONNECT_TIMEOUT_MS', int(1, 600_000), '10000'],
  headersTimeoutMs: ['IMAGEGEN_HEADERS_TIMEOUT_MS', int(1, 600_000), '30000'],
  bodyTimeoutMs: ['IMAGEGEN_BODY_TIMEOUT_MS', int(1, 600_000), '30000'],
  requestTimeoutMs: ['IMAGEGEN_REQUEST_TIMEOUT_MS', int(1, 3_600_000), '60000'],
  maxResponseBytes: ['IMAGEGEN_MAX_RESPONSE_BYTES', int(1024), String(1024 * 1024)],
  maxDownloadBytes: ['IMAGEGEN_MAX_DOWNLOAD_BYTES', int(1), String(50 * 1024 * 1024)],
  downloadMaxRedirects: ['IMAGEGEN_DOWNLOAD_MAX_REDIRECTS', int(0, 20), '3'],
  maxAmbiguousTries: ['IMAGEGEN_MAX_AMBIGUOUS_TRIES', int(1, 1000), '6'],
  idempotencyWindowMs: ['IMAGEGEN_IDEMPOTENCY_WINDOW_MS', int(1000, 366 * 86_400_000), String(86_400_000)],
  notFoundWindowMs: ['IMAGEGEN_NOT_FOUND_WINDOW_MS', int(0, 86_400_000), '90000'],
  backoffBaseMs: ['IMAGEGEN_BACKOFF_BASE_MS', int(1, 3_600_000), '1000'],
  backoffMaxMs: ['IMAGEGEN_BACKOFF_MAX_MS', int(1, 86_400_000), '60000'],
  defaultRetryAfterMs: ['IMAGEGEN_DEFAULT_RETRY_AFTER_MS', int(1, 3_600_000), '1000'],
  clientRatePerSec: ['IMAGEGEN_CLIENT_RATE_PER_SEC', int(0, 100_000), '0'],
  learnLimits: ['IMAGEGEN_LEARN_LIMITS', onOff, 'on'],
  clientRateBurst: ['IMAGEGEN_CLIENT_RATE_BURST', int(1, 100_000), '10'],
  httpConnections: ['IMAGEGEN_HTTP_CONNECTIONS', int(1, 1024), '16'],
  downloadAllowHosts: [
    DOWNLOAD_ALLOW_HOSTS_ENV,
    z
      .string()
      .superRefine((s, ctx) => {
        const parsed = parseAllowList(s);
        if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
      })
      .transform((s) =>
        s
          .split(',')
          .map((x) => x.trim().toLowerCase())
          .filter((x) => x !== ''),
      ),
    '',
  ],
  scheduleSources: [
    SCHEDULE_SOURCES_ENV,
    z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((x) => x.trim())
          .filter((x) => x !== ''),
      )
      .refine((list) => list.every((x) => path.isAbsolute(x)), 'must list absolute folders, comma-separated'),
    '',
  ],
  requestFields: [
    'IMAGEGEN_REQUEST_FIELDS',
    z.string().transform((s, ctx) => {
      const parsed = parseRequestFields(s);
      if (typeof parsed === 'string') {
        ctx.addIssue({ code: 'custom', message: parsed });
        return z.NEVER;
      }
      return parsed;
    }),
    '',
  ],
  requestTemplate: [
    'IMAGEGEN_REQUEST_TEMPLATE',
    z.string().transform((s, ctx) => {
      const parsed = parseRequestTemplate(s);
      if (typeof parsed === 'string') {
        ctx.addIssue({ code: 'custom', message: parsed });
        return z.NEVER;
      }
      return parsed;
    }),
    '{}',
  ],
} as const satisfies { [K in keyof ServiceConfig]: readonly [string, z.ZodType<ServiceConfig[K], string>, string] };

/** The environment variable of each setting (for documentation and error messages). */
export const SERVICE_CONFIG_ENV: Readonly<Record<keyof ServiceConfig, string>> = Object.fromEntries(
  Object.entries(SETTINGS).map(([k, [variable]]) => [k, variable]),
) as Record<keyof ServiceConfig, string>;

/**
 * Reads and validates the service configuration from `env`. Unset or empty variables take their default.
 * Throws a {@link ConfigError} naming the first variable that is wrong and why.
 */
export function loadServiceConfig(env: Readonly<Record<string, string | undefined>> = process.env): ServiceConfig {
  const out: Record<string, unknown> = {};
  for (const [field, [variable, schema, fallback]] of Object.entries(SETTINGS)) {
    const raw = env[variable];
    const value = raw === undefined || raw.trim() === '' ? fallback : raw;
    const parsed = (schema as z.ZodType<unknown, string>).safeParse(value);
    if (!parsed.success) {
      const problem = parsed.error.issues.map((i) => i.message).join('; ');
      // Never the value itself when it may be a secret put in the wrong variable (src/config/redact.ts).
      throw new ConfigError(variable, `${withoutValue(problem, value)}${gotValue(variable, value)}`);
    }
    out[field] = parsed.data;
  }
  const config = out as unknown as ServiceConfig;
  const plainHttp = plainHttpProblem(config.baseUrl, env[ALLOW_INSECURE_HTTP_ENV]);
  if (plainHttp) throw new ConfigError(plainHttp.variable, plainHttp.problem);
  const clash = templateClash(config.requestTemplate, config.requestFields);
  if (clash) throw new ConfigError(SETTINGS.requestTemplate[0], clash);
  keyCarrierProblem(env, config);
  if (config.backoffMaxMs < config.backoffBaseMs) {
    throw new ConfigError(
      SETTINGS.backoffMaxMs[0],
      `must be at least ${SETTINGS.backoffBaseMs[0]} (${config.backoffMaxMs} < ${config.backoffBaseMs})`,
    );
  }
  return config;
}

/**
 * Throws a {@link ConfigError} when the idempotency key's carrier cannot be used: both a header and a body field set
 * (the key travels in one of them), or a body field that a request field or the template already uses.
 */
function keyCarrierProblem(env: Readonly<Record<string, string | undefined>>, config: ServiceConfig): void {
  const [fieldVariable] = SETTINGS.idempotencyField;
  const [headerVariable] = SETTINGS.idempotencyHeader;
  if ((env[headerVariable] ?? '').trim() !== '' && (env[fieldVariable] ?? '').trim() !== '') {
    throw new ConfigError(
      fieldVariable,
      `cannot go with ${headerVariable}: the key travels in a header or a body field, not both; unset one of them`,
    );
  }
  const clash = config.idempotencyField === undefined ? undefined : keyFieldClash(config.idempotencyField, config);
  if (clash) throw new ConfigError(fieldVariable, clash);
}

/** The defaults, as {@link loadServiceConfig} gives them for an empty environment. */
export function defaultServiceConfig(overrides: Partial<ServiceConfig> = {}): ServiceConfig {
  return { ...loadServiceConfig({}), ...overrides };
}
