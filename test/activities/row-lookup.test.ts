import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Worker, bundleWorkflowCode } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { lookupRowRecord } from '../../src/row-lookup/lookup';
import { promptWorkflowId } from '../../src/model';
import { rowRecord } from '../helpers/records';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';

const env = useTestEnv(() => createLocalEnv());

describe('lookupRowRecord (dev server)', () => {
  it('a row that has reported its record and not closed yet is taken as ended, with the record it reported', async () => {
    // Seen on CI: a batch run again adopted a row whose report had gone to the run before it (terminated just
    // after); the row then closed without reporting to the new run, which waited for its 5-minute check.
    const taskQueue = `reported-${randomUUID()}`;
    const worker = await Worker.create({
      connection: env().nativeConnection,
      taskQueue,
      workflowBundle: await bundleWorkflowCode({
        workflowsPath: path.resolve(__dirname, '../fixtures/workflows/reported-row.ts'),
        logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
      }),
    });
    const batchId = `b${randomUUID().slice(0, 8)}`;
    const workflowId = promptWorkflowId(batchId, 'row-2');
    const record = rowRecord({ batchId, rowId: 'row-2', state: 'succeeded', netUsd: 0.04, chargedUsd: 0.04 });
    const found = await worker.runUntil(async () => {
      const handle = await env().client.workflow.start('reportedRow', {
        taskQueue,
        workflowId,
        args: [`batch/${batchId}`, record],
      });
      // Until its report is in its history (the signal was sent).
      for (let i = 0; i < 100; i++) {
        const events = (await handle.fetchHistory()).events ?? [];
        if (events.some((e) => e.signalExternalWorkflowExecutionInitiatedEventAttributes)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await handle.describe()).status.name).toBe('RUNNING');
      const lookedUp = await lookupRowRecord(env().client, workflowId);
      // Terminated after its report: the record it reported stands, not one rebuilt as unknown from its keys.
      await handle.terminate('by hand');
      return [lookedUp, await lookupRowRecord(env().client, workflowId)];
    });
    expect(found[0]).toMatchObject({ status: 'closed', closedAs: 'RUNNING', record });
    expect(found[1]).toEqual({ status: 'closed', closedAs: 'TERMINATED', record });
  }, 60_000);

  it('a row still running that has not reported is running', async () => {
    const taskQueue = `unreported-${randomUUID()}`;
    const batchId = `b${randomUUID().slice(0, 8)}`;
    // No worker: the row has not even started its first task.
    const handle = await env().client.workflow.start('reportedRow', {
      taskQueue,
      workflowId: promptWorkflowId(batchId, 'row-1'),
      args: [`batch/${batchId}`, rowRecord({ batchId, rowId: 'row-1', state: 'unknown' })],
    });
    expect(await lookupRowRecord(env().client, handle.workflowId)).toEqual({ status: 'running' });
    await handle.terminate('test over');
  }, 60_000);
});
