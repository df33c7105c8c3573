import { ServiceError, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { followBatch } from '../../src/cli/batches';
import type { BatchProgress } from '../../src/model';
import type { batchWorkflow } from '../../src/workflows';

/** A gRPC error as the client's transport gives it: a status code and a message. */
const grpc = (code: number, details: string) => Object.assign(new Error(`${code} ${details}`), { code, details });

const progress = (done: boolean) => ({ batchId: 'b', done, status: done ? 'completed' : 'running' }) as BatchProgress;

/** A batch handle whose result() fails with each of `failures` in turn, then gives the final progress. */
function handle(failures: Error[]): { handle: WorkflowHandle<typeof batchWorkflow>; resultCalls: () => number } {
  let calls = 0;
  const fake = {
    workflowId: 'batch/b',
    client: { withDeadline: (_deadline: number, fn: () => Promise<unknown>) => fn() },
    query: async () => progress(false),
    result: async () => {
      const failure = failures[calls++];
      if (failure) throw failure;
      return progress(true);
    },
  };
  return { handle: fake as unknown as WorkflowHandle<typeof batchWorkflow>, resultCalls: () => calls };
}

describe('following a batch through an outage of Temporal', () => {
  it("waits out UNAVAILABLE while the history service restarts, and returns the batch's end", async () => {
    const outage = new ServiceError('Failed to get Workflow execution history', {
      cause: grpc(14, 'Not enough hosts to serve the request'),
    });
    const { handle: h, resultCalls } = handle([outage, outage]);
    const final = await followBatch(h, () => undefined, { intervalMs: 10 });
    expect(final.done).toBe(true);
    expect(resultCalls()).toBe(3);
  });

  it('does not hide a failure of the batch itself, nor an error that does not pass', async () => {
    const failed = new WorkflowFailedError('Workflow execution failed', undefined, 'NON_RETRYABLE_FAILURE');
    await expect(followBatch(handle([failed]).handle, () => undefined, { intervalMs: 10 })).rejects.toBe(failed);
    const denied = new ServiceError('Failed to get Workflow execution history', { cause: grpc(7, 'denied') });
    await expect(followBatch(handle([denied]).handle, () => undefined, { intervalMs: 10 })).rejects.toBe(denied);
  });
});
