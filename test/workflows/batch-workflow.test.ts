import { describe, expect, it } from 'vitest';
import { batchWorkflowId } from '../../src/model';
import { batchWorkflow, cancelSignal, pauseSignal, progressQuery, resumeSignal } from '../../src/workflows';
import { createTimeSkippingEnv, useTestEnv } from '../helpers/temporal';
import { rows, startBatch, until } from './batch-fakes';

const env = useTestEnv(createTimeSkippingEnv);

describe('batchWorkflow (scripted activities, time-skipping server)', () => {
  it('runs every row once through a sliding window and continues as new several times', async () => {
    const all = rows(30);
    const { worker, fake, batchId, taskQueue, input } = await startBatch(env, all, () => 'slow', {
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
    // The file's first test bundles the workflow code too: seconds alone, far more on a loaded machine (seen on CI).
  }, 120_000);

  it('a batch-level stop pauses the batch, no row fails, and a resume finishes it', async () => {
    const all = rows(6);
    // row-3's first submission meets a 402; later ones pass.
    const { worker, batchId, taskQueue, input } = await startBatch(
      env,
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
    const { worker, batchId, taskQueue, input } = await startBatch(env, all, () => 'ok', {
      concurrency: 1,
      pageSize: 5,
    });
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

  it("the progress says the limit a row's worker said binds, while the batch runs", async () => {
    const all = rows(3);
    // row-1 ends with its worker saying the account's quota binds; row-2 then holds the batch open.
    const { worker, batchId, taskQueue, input } = await startBatch(
      env,
      all,
      (rowId) => (rowId === 'row-1' ? 'quota' : rowId === 'row-2' ? 'hang' : 'ok'),
      { concurrency: 1, pageSize: 3 },
    );
    const progress = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [input],
      });
      const p = await until(
        env,
        () => handle.query(progressQuery),
        (q) => q.counts.succeeded === 1,
      );
      expect(p.limit).toBe('concurrency');
      await handle.signal(cancelSignal);
      return handle.result();
    });
    expect(progress.status).toBe('cancelled');
    expect(progress.limit).toBeUndefined();
  });

  it('a spend cap pauses before the row that would pass it; resume with a higher cap finishes', async () => {
    const all = rows(5);
    const { worker, batchId, taskQueue, input } = await startBatch(env, all, () => 'ok', {
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

  it('a price given that the service contradicts: the cap counts the higher, and the progress says so', async () => {
    // No catalog price for the model; the user says 0.01 per image; every creation says it cost 0.04.
    const all = rows(5).map((r) => ({ ...r, request: { ...r.request, model: 'unlisted' } }));
    const { worker, batchId, taskQueue, input } = await startBatch(env, all, () => 'ok', {
      concurrency: 1,
      spendCapUsd: 0.1,
      prices: { unlisted: 0.01 },
    });
    const p = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId: batchWorkflowId(batchId),
        args: [input],
      });
      // Waits for `kind` with no row in flight: the cap's hold can show while the row before it still runs.
      const wait = async (kind: string) => {
        let progress = await handle.query(progressQuery);
        for (let i = 0; i < 50 && (progress.waiting?.kind !== kind || progress.inFlight > 0); i++) {
          await env().sleep(1_000);
          progress = await handle.query(progressQuery);
        }
        return progress;
      };
      // The first charge above the price given trips the stop-loss: the batch pauses, and says why.
      const tripped = await wait('stop_loss');
      expect(tripped.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'price_differs' } });
      expect(tripped.counts.succeeded).toBe(1);
      await handle.signal(resumeSignal);
      const progress = await wait('spend_cap');
      await handle.cancel();
      return progress;
    });
    // At 0.01 a row, three rows would start (0.12 charged); at the 0.04 seen, two (0.08), and the third waits.
    expect(p.waiting).toMatchObject({ kind: 'spend_cap', capUsd: 0.1 });
    expect(p.counts.succeeded).toBe(2);
    expect(p.spentUsd).toBeCloseTo(0.08, 6);
    expect(p.pricesSeen).toEqual([{ model: 'unlisted', givenUsd: 0.01, source: 'user', chargedUsd: 0.04 }]);
  });

  it('the spend cap holds through continue-as-new with rows in flight: spent + reserved never passes it', async () => {
    // 30 rows at 0.04: the cap lets 12 run (0.48), the 13th would pass it. A run continues as new after 60 events,
    // with up to 3 rows in flight whose reservations the next run must carry.
    const cap = 0.5;
    const all = rows(30);
    const { worker, fake, launch } = await startBatch(env, all, () => 'slow', {
      concurrency: 3,
      pageSize: 2,
      maxHistoryEvents: 60,
      spendCapUsd: cap,
    });
    const seen: string[] = [];
    const final = await worker.runUntil(async () => {
      const handle = await launch();
      let samples = 0;
      const held = await handle.progress((p) => {
        samples += 1;
        if (p.spentUsd + p.reservedUsd > cap + 1e-9) seen.push(`spent ${p.spentUsd} + reserved ${p.reservedUsd}`);
        const byCap =
          p.waiting?.kind === 'spend_cap' ||
          (p.waiting?.kind === 'paused' && p.waiting.reason.startsWith('spend cap of'));
        return byCap && p.inFlight === 0;
      });
      expect(samples).toBeGreaterThan(1);
      expect(held.runs).toBeGreaterThan(1);
      expect(held.status).toBe('paused');
      expect(held.spendCapUsd).toBe(cap);
      expect(held.counts.succeeded).toBe(12);
      expect(held.spentUsd).toBeCloseTo(0.48);
      expect(held.reservedUsd).toBe(0);
      expect(held.leftUsd).toBeCloseTo(0.02);
      await handle.signal(cancelSignal);
      return handle.result();
    });
    expect(seen, 'progress samples past the cap').toEqual([]);
    expect(final.status).toBe('cancelled');
    expect(final.runs).toBeGreaterThan(1);
    // What the fake service charged, 0.04 a submission, stays within the cap and is the batch's spend.
    expect(fake.stats.submits).toBe(12);
    expect(final.spentUsd).toBeCloseTo(fake.stats.submits * 0.04);
    expect(final.counts.not_run).toBe(18);
  }, 120_000);
});
