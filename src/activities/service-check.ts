import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { API_KEY_ENV, API_KEY_FILE_ENV, type ApiKeyProvider } from '../api/api-key';
import { lazyClient, type Logger } from '../api/client';
import type { HoldRegistry } from '../api/holds';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import { ServiceProblem, type ServiceCheck } from '../model';
import { whileHeartbeating } from './heartbeat';

/**
 * `checkService`: the free checks `run` makes on a worker before a batch starts, with one GET of the catalog: the base
 * URL can be reached, the key is not refused, the catalog is read when the service has one. Only what would make every
 * request of the batch fail stops it: nothing sent (the base URL cannot be reached), a refused key, no usable key. A
 * catalog the service does not have (404), a busy or failing service, an answer of another shape block nothing.
 */
export interface ServiceCheckDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  dispatcher?: Dispatcher;
  holds?: HoldRegistry;
  now: () => number;
  logger: Logger;
}

const KEY_SETTINGS = `${API_KEY_ENV} / ${API_KEY_FILE_ENV}`;

export function createServiceCheckActivities(deps: ServiceCheckDeps) {
  const api = lazyClient(deps);
  return {
    async checkService(): Promise<ServiceCheck> {
      const ctx = Context.current();
      const outcome = await whileHeartbeating(ctx, api().listModels(ctx.cancellationSignal));
      const url = `${deps.config.baseUrl}${deps.config.modelsPath}`;
      switch (outcome.kind) {
        case 'models':
          return { ok: true, models: outcome.models };
        case 'notSent':
          return {
            ok: false,
            problem: ServiceProblem.Unreachable,
            message:
              `the service cannot be reached from the worker: GET ${url}: ${outcome.lastError}; fix ` +
              `${SERVICE_CONFIG_ENV.baseUrl} (host, port, http or https) or start the service; nothing was sent`,
          };
        case 'batchStop': {
          const { httpStatus, reason, message } = outcome.details;
          if (httpStatus !== 401 && httpStatus !== 403) return { ok: true };
          return {
            ok: false,
            problem: ServiceProblem.KeyRefused,
            message:
              `the service refused the worker's key (HTTP ${httpStatus} ${reason}: ${message}); check ` +
              `${KEY_SETTINGS} in the worker's environment (imagebatch doctor says more); nothing was sent`,
          };
        }
        case 'config':
          return {
            ok: false,
            problem: ServiceProblem.WorkerConfig,
            message: `the worker cannot send: ${outcome.message} (${KEY_SETTINGS}); nothing was sent`,
          };
        case 'ambiguous':
        case 'malformed':
        case 'rateLimited':
        case 'accepted':
        case 'ended':
        case 'inFlight':
        case 'refunded':
        case 'rejected':
        case 'notFound':
          return { ok: true };
      }
    },
  };
}
