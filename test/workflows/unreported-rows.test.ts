import { describe, expect, it } from 'vitest';
import { cancelSignal, pauseSignal } from '../../src/workflows';
import { promptWorkflowId } from '../../src/model';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';
import { rows, startBatch } from './batch-fakes';

// The dev server, not the time-skipping one: the latter never tells a parent that its child was terminated.
const env = useTestEnv(() => createLocalEnv());
const hangFirst = (rowId: string) => (rowId === 'row-1' ? ('hang' as const) : ('ok' as const));

/**
 * A row terminated by hand never reports to its batch: the batch's safety net counts it from what Temporal keeps of
 * it, instead of waiting for it forever (its place in the window, and the batch's end).
 */
describe('rows that close without reporting (dev server)', () => {
  it('a cancelled batch whose row was terminated by hand ends, counting the row as cancelled', async () => {
    const all = rows(3);
    const { worker, batchId, launch } = await startBatch(env, all, hangFirst, { concurrency: 1 });
    const progress = await worker.runUntil(async () => {
      const handle = await launch();
      await handle.progress((p) => p.started === 1);
      await handle.signal(pauseSignal, 'before the terminate');
      await env().client.workflow.getHandle(promptWorkflowId(batchId, 'row-1')).terminate('by hand');
      // The batch sees its child close and counts it; paused, it starts nothing else.
      const counted = await handle.progress((p) => p.counts.cancelled === 1);
      expect(counted).toMatchObject({ inFlight: 0, started: 1 });
      await handle.signal(cancelSignal);
      return handle.result();
    });
    expect(progress.status).toBe('cancelled');
    expect(progress.counts).toEqual({
      succeeded: 0,
      reused: 0,
      images_unsaved: 0,
      failed: 0,
      unknown: 0,
      cancelled: 1,
      not_run: 2,
    });
  }, 120_000);

  it('a terminated row of an earlier run (after continue-as-new) is found by the periodic check', async () => {
    const all = rows(8);
    const { worker, batchId, launch } = await startBatch(env, all, hangFirst, {
      concurrency: 2,
      pageSize: 1,
      maxHistoryEvents: 30,
      rowCheckEveryMs: 2_000,
    });
    const progress = await worker.runUntil(async () => {
      const handle = await launch();
      // row-1 hangs through continue-as-new: the run that carries it cannot see it close.
      await handle.progress((p) => p.runs >= 2 && p.counts.succeeded === 7);
      await env().client.workflow.getHandle(promptWorkflowId(batchId, 'row-1')).terminate('by hand');
      return handle.result();
    });
    expect(progress.status).toBe('completed');
    expect(progress.runs).toBeGreaterThanOrEqual(2);
    expect(progress.counts).toEqual({
      succeeded: 7,
      reused: 0,
      images_unsaved: 0,
      failed: 0,
      unknown: 0,
      cancelled: 1,
      not_run: 0,
    });
  }, 120_000);
});
