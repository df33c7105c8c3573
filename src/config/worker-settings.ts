import { loadApiKey } from './api-key';
import type { Env } from './env';
import { loadServiceConfig } from './service-config';

/**
 * The worker's settings (the service's, and its key), read as the worker reads them: throws on the first that is
 * wrong or missing, naming it. A command checks them before it starts a worker, so a wrong one is one line.
 */
export function checkWorkerSettings(env: Env): void {
  loadServiceConfig(env);
  loadApiKey(env);
}
