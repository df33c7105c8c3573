import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ModelInfo } from '../activities/types';

const { fetchModels } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 3 },
});

/**
 * The service's model catalog, as the account sees it.
 *
 * Why a workflow for one GET: only the worker holds the API key. The CLI's `validate` asks the catalog through
 * a worker, so the key never has to be in the CLI's environment, arguments or history.
 */
export async function modelCatalogWorkflow(): Promise<ModelInfo[]> {
  return fetchModels();
}
