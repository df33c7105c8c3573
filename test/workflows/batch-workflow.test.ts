import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import type { BatchCursor, BatchRowInput, ReadBatchPageInput, ReadBatchPageResult } from '../../src/activities/types';
import { FailureType } from '../../src/api/failure-types';
import {
  batchWorkflow,
  batchWorkflowId,
  cancelSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  type BatchWorkflowInput,
} from '../../src/workflows';
import { createTimeSkippingEnv, useTestEnv, workflowBundle } from '../helpers/temporal';

const env = useTestEnv(createTimeSkippingEnv);

function rows(n: number): BatchRowInput[] {
  return Array.from({ length: n }, (_, i) => ({
    rowId: `row-${i + 1}`,
    line: i + 2,
    request: { prompt: `prompt number ${i + 1}`, model: 'flux-dev' },
  }));
}

/**
 * Fake activities for a whole batch: pages from an in-memory list, and per-row behaviour decided by a function
 * of the row id and its submission count. Records the largest number of rows open at once.
 */
function batchActivities(
  all: BatchRowInput[],
  behaviour: (rowId: string, submission: number) => 'ok' | 'stop' | 'slow',
) {
  const submissions = new Map<string, number>();
  const open = new Set<string>();
  const stats = { maxOpen: 0, submits: 0, pagesRead: 0 };
  return {
    stats,
    activities: {
      async readBatchPage(input: ReadBatchPageInput): Promise<ReadBatchPageResult> {
        stats.pagesRead += 1;
        const start = input.cursor?.byteOffset ?? 0;
        const page = all.slice(start, start + input.maxRows);
        const next: BatchCursor = {
          byteOffset: start + page.length,
          line: 0,
          rowsBefore: start + page.length,
          header: ['prompt'],
        };
        return { rows: page, invalidRows: 0, nextCursor: next, done: start + page.length >= all.length };
      },
      async fetchModels() {
        return [{ id: 'flux-dev', priceUsd: 0.04 }];
      },
      async lookupRow() {
        return { status: 'running' as const };
      },
      async submitCreation(input: { idempotencyKey: string }) {
        const rowId = input.idempotencyKey.split('.')[2]!;
        const n = (submissions.get(rowId) ?? 0) + 1;
        submissions.set(rowId, n);
        stats.submits += 1;
        if (behaviour(rowId, n) === 'stop') {
          const { ApplicationFailure } = await import('@temporalio/common');
          throw ApplicationFailure.create({
            type: FailureType.BatchStop,
            nonRetryable: true,
            message: 'insufficient balance',
            details: [{ reason: 'insufficient_balance', httpStatus: 402, message: 'top up', requiredUsd: 0.04 }],
          });
        }
        open.add(rowId);
        stats.maxOpen = Math.max(stats.maxOpen, open.size);
        return { creationId: `c-${rowId}-${n}`, status: 'queued', costUsd: 0.04 };
      },
      async collectCreation(input: { rowId: string; creationId: string }) {
        if (behaviour(input.rowId, 0) === 'slow') await new Promise((r) => setTimeout(r, 50));
        open.delete(input.rowId);
        return {
          poll: { outcome: 'succeeded' as const, status: 'succeeded', images: [] },
          images: [{ url: 'u', path: `${input.rowId}.png`, sha256: 'x', bytes: 1 }],
        };
      },
    },
  };
}

async function startBatch(
  all: BatchRowInput[],
  behaviour: Parameters<typeof batchActivities>[1],
  extra: Partial<BatchWorkflowInput>,
) {
  const taskQueue = `batch-${randomUUID()}`;
  const fake = batchActivities(all, behaviour);
  const worker = await Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: fake.activities,
  });
  const batchId = `b${randomUUID().slice(0, 8)}`;
  const input: BatchWorkflowInput = { batchId, file: 'mem', outDir: '/tmp/out', ...extra };
  return { worker, fake, batchId, taskQueue, input };
}

describe('batchWorkflow (scripted activities, time-skipping server)', () => {
  it('runs every row once through a sliding window and continues as new several times', async () => {
    const all = rows(30);
    const { worker, fake, batchId, taskQueue, input } = await startBatch(all, () => 'slow', {
      concurrency: 3,
      pageSize: 4,
      maxHistoryEvents: 80,
    });
    const progress = await worker.runUntil(
      env().client.workflow.execute(batchWorkflow, { taskQueue, workflowId: batchWorkflowId(batchId), args: [input] }),
    );
    expect(progress.done).toBe(true);
    expect(progress.status).toBe('completed');
    expect(progress.counts.succeeded).toBe(30);
    expect(progress.started).toBe(30);
    expect(progress.rowsRead).toBe(30);
    expect(fake.stats.submits).toBe(30);
    expect(fake.stats.maxOpen).toBeLessThanOrEqual(3);
    expect(progress.runs).toBeGreaterThan(1);
    expect(progress.spentUsd).toBeCloseTo(30 * 0.04);
  });

  it('a batch-level stop pauses the batch, no row fails, and a resume finishes it', async () => {
    const all = rows(6);
    // row-3's first submission meets a 402; later ones pass.
    const { worker, batchId, taskQueue, input } = await startBatch(
      all,
      (rowId, n) => (rowId === 'row-3' && n === 1 ? 'stop' : 'ok'),
      { concurrency: 2, pageSize: 10 },
    );
    const progress = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [input],
      });
      let paused = await handle.query(progressQuery);
      for (let i = 0; i < 50 && paused.status !== 'paused'; i++) {
        await env().sleep(1_000);
        paused = await handle.query(progressQuery);
      }
      expect(paused.status).toBe('paused');
      expect(paused.waiting).toMatchObject({ kind: 'batch_stop', details: { httpStatus: 402, requiredUsd: 0.04 } });
      expect(paused.counts.failed).toBe(0);
      await handle.signal(resumeSignal);
      return handle.result();
    });
    expect(progress.counts.succeeded).toBe(6);
    expect(progress.counts.failed).toBe(0);
  });

  it('pause stops new rows, cancel ends the batch with rows not run', async () => {
    const all = rows(20);
    const { worker, batchId, taskQueue, input } = await startBatch(all, () => 'ok', { concurrency: 1, pageSize: 5 });
    const progress = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [input],
      });
      await handle.signal(pauseSignal, 'lunch');
      const p = await handle.query(progressQuery);
      expect(p.status).toBe('paused');
      const startedWhilePaused = p.started;
      await env().sleep(2_000);
      expect((await handle.query(progressQuery)).started).toBe(startedWhilePaused);
      await handle.signal(cancelSignal);
      return handle.result();
    });
    expect(progress.status).toBe('cancelled');
    expect(progress.counts.succeeded + progress.counts.cancelled).toBeLessThan(20);
    expect(progress.counts.not_run).toBeGreaterThan(0);
  });

  it('a spend cap pauses before the row that would pass it; resume with a higher cap finishes', async () => {
    const all = rows(5);
    const { worker, batchId, taskQueue, input } = await startBatch(all, () => 'ok', {
      concurrency: 1,
      spendCapUsd: 0.1,
    });
    const progress = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [input],
      });
      let p = await handle.query(progressQuery);
      for (let i = 0; i < 50 && p.waiting?.kind !== 'spend_cap'; i++) {
        await env().sleep(1_000);
        p = await handle.query(progressQuery);
      }
      expect(p.waiting).toMatchObject({ kind: 'spend_cap', capUsd: 0.1 });
      expect(p.counts.succeeded).toBe(2);
      await handle.signal(resumeSignal, { spendCapUsd: 1 });
      return handle.result();
    });
    expect(progress.counts.succeeded).toBe(5);
  });
});
