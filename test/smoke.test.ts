import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { createWorker } from '../src/worker';
import { createPingActivities } from './fixtures/ping-activities';
import { pingWorkflow } from './fixtures/workflows/ping';
import { createLocalEnv, createTimeSkippingEnv, quietBundlerLogger, useTestEnv } from './helpers/temporal';
import { lazyTempLedger } from './helpers/ledger';

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** imagebatch's workflows and the test-only ping workflow, bundled once for the file. */
function bundleWithPing(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({
    workflowsPath: path.join(__dirname, 'fixtures', 'workflows', 'with-ping.ts'),
    logger: quietBundlerLogger,
  });
  return bundle;
}

async function runPing(env: TestWorkflowEnvironment) {
  const taskQueue = `smoke-${randomUUID()}`;
  const worker = await createWorker({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: await bundleWithPing(),
    extraActivities: createPingActivities(),
    activityDeps: { ledger: lazyTempLedger() },
  });
  const workflowId = `smoke/${randomUUID()}`;
  return worker
    .runUntil(env.client.workflow.execute(pingWorkflow, { taskQueue, workflowId, args: [{ name: 'ada' }] }))
    .then((result) => ({ result, workflowId }));
}

describe.each([
  ['time-skipping test server', createTimeSkippingEnv, true],
  ['dev server', () => createLocalEnv(), false],
] as const)('smoke: one workflow, one activity on the %s', (_name, create, timeSkipping) => {
  const env = useTestEnv(create);

  it('runs pingWorkflow to completion through its activity', async () => {
    const { result, workflowId } = await runPing(env());
    expect(result).toEqual({ reply: 'pong: ada', workflowId, activityAttempt: 1 });
    expect(env().supportsTimeSkipping).toBe(timeSkipping);
  });
});
