import { lazyApiKeyProvider } from '../api/api-key';
import { apiKeyNamed, loadApiKey } from '../config/api-key';
import { ImageApiClient } from '../api/client';
import { loadServiceConfig } from '../config/service-config';
import { loadTemporalConfig } from '../config/temporal-config';
import type { ModelInfo } from '../model';

/**
 * `validate` with a key at hand: the account's catalog read in this process, with the api layer and the settings
 * of the command's own environment, as the worker reads them (the same client, request and parsing: `listModels`).
 *
 * Why not through the local worker: reading the catalog that way would start the local Temporal server and worker
 * (seconds, and processes left running) for one free GET, from a command that otherwise starts nothing. The key is
 * already in this process's environment (in local mode the CLI gives its environment to the worker it starts);
 * it goes only into the request's header, never into a message, a log line or a file.
 */

/** Whether `validate` reads the catalog itself: a key is set in its environment and no Temporal address is. */
export function keyAtHand(env: Readonly<Record<string, string | undefined>>): boolean {
  if (!apiKeyNamed(env)) return false;
  try {
    return loadTemporalConfig(env).addressFrom === undefined;
  } catch {
    return false; // settings a worker would refuse: `validate --catalog` says what is wrong
  }
}

/** The account's catalog, or why it could not be read (the key is never part of it). */
export async function readCatalogHere(
  env: Readonly<Record<string, string | undefined>>,
): Promise<{ models: ModelInfo[] } | { problem: string }> {
  let client: ImageApiClient;
  try {
    client = new ImageApiClient({ config: loadServiceConfig(env), apiKey: lazyApiKeyProvider(() => loadApiKey(env)) });
  } catch (err) {
    return { problem: err instanceof Error ? err.message : String(err) };
  }
  const url = `${client.config.baseUrl}${client.config.modelsPath}`;
  try {
    const outcome = await client.listModels();
    switch (outcome.kind) {
      case 'models':
        return { models: outcome.models };
      case 'config':
        return { problem: outcome.message };
      case 'notSent':
      case 'ambiguous':
      case 'malformed':
        return { problem: `GET ${url}: ${outcome.lastError}` };
      case 'batchStop':
        return { problem: `GET ${url}: HTTP ${outcome.details.httpStatus} ${outcome.details.reason}` };
      default:
        return { problem: `GET ${url}: an answer of kind ${outcome.kind}` };
    }
  } catch (err) {
    return { problem: `GET ${url}: ${err instanceof Error ? err.message : String(err)}` };
  } finally {
    await client.close();
  }
}
