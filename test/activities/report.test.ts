import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities';
import { FailureType } from '../../src/api/failure-types';
import { defaultServiceConfig } from '../../src/config/service-config';

describe('collectCreation reporting to its batch', () => {
  it('fails loudly, before any request, when it must report but the worker has no Temporal client', async () => {
    const activities = createActivities({
      config: defaultServiceConfig({ baseUrl: 'http://127.0.0.1:9/api/public/v1' }),
      apiKey: () => 'img_live_' + 'a'.repeat(40),
    });
    const input = {
      creationId: 'cr_1',
      batchId: 'b',
      rowId: 'r',
      outDir: '/tmp/unused',
      reportOnSuccess: {
        parentWorkflowId: 'batch/b',
        summary: { rowId: 'r', state: 'failed', chargedUsd: 0.04, refundedUsd: 0, attempts: 1 },
      },
    };
    await expect(
      new MockActivityEnvironment().run((i: typeof input) => activities.collectCreation(i), input),
    ).rejects.toMatchObject({
      type: FailureType.Config,
      nonRetryable: true,
    });
  });
});
