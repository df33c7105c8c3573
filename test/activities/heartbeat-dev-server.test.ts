import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { activityInfo, ApplicationFailure, heartbeat } from '@temporalio/activity';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { createLocalEnv, useTestEnv } from '../helpers/temporal';
import { probeHeartbeatWorkflow } from './fixtures/workflows';

/**
 * The same measurement as in durable-retry.test.ts, on the real server code (`temporal server start-dev`),
 * since the time-skipping server is a separate implementation: what createImage keeps of its key in heartbeat
 * details (its creation, the last poll, the count of unknown outcomes) must survive failed attempts on the server
 * that runs batches.
 */
describe('heartbeat details across failed attempts on the dev server', () => {
  const env = useTestEnv(() => createLocalEnv());

  it('survive a failed attempt and an attempt that did not heartbeat', async () => {
    const noop = () => undefined;
    const bundle = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, 'fixtures', 'workflows.ts'),
      logger: { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop },
    });
    const seen: { attempt: number; details: unknown }[] = [];
    const taskQueue = `probe-${randomUUID()}`;
    const worker = await Worker.create({
      connection: env().nativeConnection,
      taskQueue,
      workflowBundle: bundle,
      activities: {
        async countAttempts(input: { heartbeatOnAttempts: number[]; succeedOnAttempt: number }) {
          const info = activityInfo();
          seen.push({ attempt: info.attempt, details: info.heartbeatDetails as unknown });
          if (info.attempt >= input.succeedOnAttempt) return { attempt: info.attempt };
          if (input.heartbeatOnAttempts.includes(info.attempt)) heartbeat({ fromAttempt: info.attempt });
          throw ApplicationFailure.create({ type: 'Probe', message: 'again', nextRetryDelay: 50 });
        },
      },
    });
    const result = await worker.runUntil(
      env().client.workflow.execute(probeHeartbeatWorkflow, {
        taskQueue,
        workflowId: randomUUID(),
        args: [{ heartbeatOnAttempts: [1, 3, 4], succeedOnAttempt: 6 }],
      }),
    );
    expect(result).toEqual({ ok: true, value: { attempt: 6 } });
    expect(seen.map((s) => s.details)).toEqual([
      undefined,
      { fromAttempt: 1 },
      { fromAttempt: 1 },
      { fromAttempt: 3 },
      { fromAttempt: 4 },
      { fromAttempt: 4 },
    ]);
  });
});
