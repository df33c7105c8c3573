import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ModelInfo, PaidRequests, PaidRequestsInput, ServiceCheck } from '../model';
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

// Reads the batch file once, asking the store a page at a time.
const { countPaidRequests } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { maximumAttempts: 3 },
});

/**
 * Which of a batch file's requests were paid before, with the worker's own settings (the request template and field
 * names shape each request's fingerprint): what `run` and `validate --catalog` say before anything is sent.
 */
export async function paidRequestsWorkflow(input: PaidRequestsInput): Promise<PaidRequests> {
  return countPaidRequests(input);
}

// One GET, one attempt (a check that hangs is the CLI's to give up on): `run` waits for it before a batch starts.
const { checkService } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { maximumAttempts: 1 },
});

/**
 * The free checks `run` makes before a batch starts, on a worker (the key lives only there): the base URL can be
 * reached, the key is not refused, the catalog (when the service has one). See `src/activities/service-check.ts`.
 */
export async function serviceCheckWorkflow(): Promise<ServiceCheck> {
  return checkService();
}
