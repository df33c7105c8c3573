import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../../src/api/money';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PENDING_STATUSES, DEFAULT_SUCCESS_STATUSES } from '../../src/api/contract';
import { DEFAULT_IMAGE_FIELDS } from '../../src/api/schemas';
import { ConfigError, loadServiceConfig, SERVICE_CONFIG_ENV } from '../../src/config/service-config';

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadServiceConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('loadServiceConfig', () => {
  it('has the documented defaults', () => {
    expect(loadServiceConfig({})).toEqual({
      baseUrl: 'http://127.0.0.1:8787/api/public/v1',
      submitPath: '/creations',
      creationPath: '/creations/{id}',
      modelsPath: '/models',
      idempotencyHeader: 'Idempotency-Key',
      idempotencyWindowMs: 86_400_000,
      notFoundWindowMs: 90_000,
      authHeader: 'bearer',
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      pendingStatuses: DEFAULT_PENDING_STATUSES,
      imageDiscovery: true,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      requestFields: {
        prompt: 'prompt',
        model: 'model',
        negative_prompt: 'negative_prompt',
        width: 'width',
        height: 'height',
        seed: 'seed',
        num_images: 'num_images',
      },
      requestTemplate: {},
      idFields: ['id'],
      statusFields: ['status'],
      errorFields: ['error'],
      imageFields: DEFAULT_IMAGE_FIELDS,
      modelIdFields: ['id'],
      minPollIntervalMs: 2000,
      pollPlan: 'learn',
      connectTimeoutMs: 10_000,
      headersTimeoutMs: 30_000,
      bodyTimeoutMs: 30_000,
      requestTimeoutMs: 60_000,
      maxResponseBytes: 1024 * 1024,
      maxDownloadBytes: 50 * 1024 * 1024,
      downloadMaxRedirects: 3,
      downloadAllowHosts: [],
      scheduleSources: [],
      maxAmbiguousTries: 6,
      backoffBaseMs: 1000,
      backoffMaxMs: 60_000,
      defaultRetryAfterMs: 1000,
      clientRatePerSec: 0,
      learnLimits: true,
      clientRateBurst: 10,
      httpConnections: 16,
    });
  });

  it('reads every setting from its variable', () => {
    const c = loadServiceConfig({
      IMAGEGEN_BASE_URL: 'https://api.example.com/api/public/v1/',
      IMAGEGEN_SUBMIT_PATH: '/jobs',
      IMAGEGEN_AUTH_HEADER: 'X-API-Key',
      IMAGEGEN_SUCCESS_STATUSES: ' Done , OK ',
      IMAGEGEN_MIN_POLL_INTERVAL_MS: '5000',
      IMAGEGEN_MAX_AMBIGUOUS_TRIES: '3',
      IMAGEGEN_IDEMPOTENCY_HEADER: 'X-Idem',
      IMAGEGEN_HEADERS_TIMEOUT_MS: '',
      IMAGEGEN_REQUEST_TIMEOUT_MS: '15000',
      IMAGEGEN_COST_FIELDS: ' fee.usd , total ',
      IMAGEGEN_PRICE_FIELDS: 'rates.per_image',
      IMAGEGEN_POLL_PLAN: ' Learn ',
      IMAGEGEN_PENDING_STATUSES: 'IN_QUEUE, warming_up',
      IMAGEGEN_IMAGE_DISCOVERY: ' OFF ',
    });
    expect(c).toMatchObject({
      baseUrl: 'https://api.example.com/api/public/v1',
      submitPath: '/jobs',
      authHeader: 'x-api-key',
      successStatuses: ['done', 'ok'],
      minPollIntervalMs: 5000,
      maxAmbiguousTries: 3,
      idempotencyHeader: 'X-Idem',
      headersTimeoutMs: 30_000,
      requestTimeoutMs: 15_000,
      costFields: ['fee.usd', 'total'],
      priceFields: ['rates.per_image'],
      pollPlan: 'learn',
      pendingStatuses: ['in_queue', 'warming_up'],
      imageDiscovery: false,
    });
    expect(Object.keys(SERVICE_CONFIG_ENV)).toHaveLength(Object.keys(c).length);
  });

  it.each([
    [{ IMAGEGEN_BASE_URL: 'not a url' }, 'IMAGEGEN_BASE_URL', 'must be an absolute URL'],
    [{ IMAGEGEN_BASE_URL: 'ftp://x/api' }, 'IMAGEGEN_BASE_URL', 'must use http or https'],
    [{ IMAGEGEN_BASE_URL: 'https://u:p@x/api' }, 'IMAGEGEN_BASE_URL', 'must not contain credentials'],
    [{ IMAGEGEN_SUBMIT_PATH: 'creations' }, 'IMAGEGEN_SUBMIT_PATH', 'must be a path starting with "/"'],
    [{ IMAGEGEN_COST_FIELDS: 'cost usd' }, 'IMAGEGEN_COST_FIELDS', 'must be a field name or a dotted path'],
    [{ IMAGEGEN_PRICE_FIELDS: 'pricing..usd' }, 'IMAGEGEN_PRICE_FIELDS', 'must be a field name or a dotted path'],
    [{ IMAGEGEN_PRICE_FIELDS: ' , ' }, 'IMAGEGEN_PRICE_FIELDS', 'must list at least one field'],
    [{ IMAGEGEN_CREATION_PATH: '/creations' }, 'IMAGEGEN_CREATION_PATH', '{id}'],
    [{ IMAGEGEN_AUTH_HEADER: 'basic' }, 'IMAGEGEN_AUTH_HEADER', '"basic"'],
    [{ IMAGEGEN_IDEMPOTENCY_HEADER: 'Bad Header' }, 'IMAGEGEN_IDEMPOTENCY_HEADER', 'valid HTTP header name'],
    [{ IMAGEGEN_SUCCESS_STATUSES: 'done,failed' }, 'IMAGEGEN_SUCCESS_STATUSES', 'must not contain "failed"'],
    [{ IMAGEGEN_SUCCESS_STATUSES: ' , ' }, 'IMAGEGEN_SUCCESS_STATUSES', 'at least one status'],
    [{ IMAGEGEN_MIN_POLL_INTERVAL_MS: '2s' }, 'IMAGEGEN_MIN_POLL_INTERVAL_MS', 'whole number'],
    [{ IMAGEGEN_POLL_PLAN: 'late' }, 'IMAGEGEN_POLL_PLAN', '"learn"'],
    [{ IMAGEGEN_IMAGE_DISCOVERY: 'maybe' }, 'IMAGEGEN_IMAGE_DISCOVERY', '"on"'],
    [{ IMAGEGEN_PENDING_STATUSES: 'queued,failed' }, 'IMAGEGEN_PENDING_STATUSES', 'must not contain "failed"'],
    [{ IMAGEGEN_MAX_AMBIGUOUS_TRIES: '0' }, 'IMAGEGEN_MAX_AMBIGUOUS_TRIES', '>='],
    [{ IMAGEGEN_MAX_DOWNLOAD_BYTES: '-1' }, 'IMAGEGEN_MAX_DOWNLOAD_BYTES', 'whole number'],
    [{ IMAGEGEN_REQUEST_TIMEOUT_MS: '0' }, 'IMAGEGEN_REQUEST_TIMEOUT_MS', '>='],
    [{ IMAGEGEN_REQUEST_TIMEOUT_MS: '1m' }, 'IMAGEGEN_REQUEST_TIMEOUT_MS', 'whole number'],
    [{ IMAGEGEN_REQUEST_TIMEOUT_MS: '3600001' }, 'IMAGEGEN_REQUEST_TIMEOUT_MS', '<='],
    [{ IMAGEGEN_BACKOFF_BASE_MS: '5000', IMAGEGEN_BACKOFF_MAX_MS: '1000' }, 'IMAGEGEN_BACKOFF_MAX_MS', 'at least'],
  ])('names the variable and the problem (%#)', (env, variable, problem) => {
    const err = errorOf(env);
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
    expect(err.message).toContain(problem);
  });
});
