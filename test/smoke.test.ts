import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createWorker } from '../src/worker';
import { pingWorkflow } from '../src/workflows';
import { createLocalEnv, createTimeSkippingEnv, useTestEnv, workflowBundle } from './helpers/temporal';

async function runPing(env: TestWorkflowEnvironment) {
  const taskQueue = `smoke-${randomUUID()}`;
  const worker = await createWorker({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
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
