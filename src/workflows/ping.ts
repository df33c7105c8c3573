import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { ping } = proxyActivities<Activities>({ startToCloseTimeout: '10 seconds' });

export interface PingWorkflowInput {
  name: string;
}

export interface PingWorkflowResult {
  reply: string;
  workflowId: string;
  activityAttempt: number;
}

/**
 * One workflow, one activity: the smallest proof that a Temporal server, a worker with its bundled workflow
 * code and its activities are wired together. It stays as the smoke test until real workflows replace it.
 */
export async function pingWorkflow(input: PingWorkflowInput): Promise<PingWorkflowResult> {
  const { reply, attempt } = await ping(input.name);
  return { reply, workflowId: workflowInfo().workflowId, activityAttempt: attempt };
}
