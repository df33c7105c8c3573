import { describe, expect, it } from 'vitest';
import { batchWorkflowId } from '../../src/model';
import { batchWorkflow } from '../../src/workflows';
import { createTimeSkippingEnv, useTestEnv } from '../helpers/temporal';
import { rows, startBatch } from './batch-fakes';

// A server of its own: a batch cancelled in another file can leave row tasks that hold time-skipping back.
const env = useTestEnv(createTimeSkippingEnv);

describe('batchWorkflow deadline (scripted activities, time-skipping server)', () => {
  it('rows not started by the deadline end as not_run, unread pages included', async () => {
    const all = rows(12);
    const { worker, batchId, taskQueue, input } = await startBatch(env, all, () => 'ok', {
      concurrency: 1,
      pageSize: 3,
      spendCapUsd: 0.08, // two rows, then the batch holds; the deadline passes while it holds
    });
    const startMs = await env().currentTimeMs();
    const progress = await worker.runUntil(
      env().client.workflow.execute(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [{ ...input, deadline: new Date(startMs + 60_000).toISOString() }],
      }),
    );
    expect(progress.counts.succeeded).toBe(2);
    expect(progress.counts.not_run).toBe(10);
    expect(progress.rowsRead).toBe(12);
  });
});
