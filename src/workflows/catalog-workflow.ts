import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ModelInfo } from '../model';
import { HEARTBEAT_TIMEOUT } from './timeouts';

// The CLI waits for this workflow at most 2 minutes (`validate --catalog`): three short attempts fit in that.
const { fetchModels } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
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
