import type { Client } from '@temporalio/client';
import { ErrorCode, ImagebatchError } from '../model/errors';
import type { ServiceCheck } from '../model';
import { serviceCheckWorkflow } from '../workflows';

/** How long `run` waits for a worker's check of the service; then it says it could not, and goes on. */
export const SERVICE_CHECK_TIMEOUT = '1 minute';

/** The service cannot serve the batch (not reached, the key refused): said before it starts; exit 1. */
export class ServiceUnusableError extends ImagebatchError {
  readonly code = ErrorCode.ServiceUnusable;
  constructor(message: string) {
    super(`${message}: no batch was started`);
  }
}

/** The worker's free checks of the service (see `src/activities/service-check.ts`), or why none answered. */
export async function checkService(client: Client, taskQueue: string): Promise<ServiceCheck | { noAnswer: string }> {
  try {
    return await client.workflow.execute(serviceCheckWorkflow, {
      taskQueue,
      workflowId: `service-check/${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
      workflowExecutionTimeout: SERVICE_CHECK_TIMEOUT,
    });
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    return { noAnswer: `${why} (is a worker running on task queue ${taskQueue}?)` };
  }
}

/** Throws {@link ServiceUnusableError} when the check found the service unusable (a check with no answer: nothing). */
export function stopIfUnusable(check: ServiceCheck | { noAnswer: string }): void {
  if ('noAnswer' in check) return;
  if (!check.ok) throw new ServiceUnusableError(check.message);
}
