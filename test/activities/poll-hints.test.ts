import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput } from '../../src/model';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/**
 * Issue #42, point 6: a Retry-After on an answer still in flight sets the earliest next poll of the creation, durably:
 * the activity's retry waits it out (the configured interval, 2 s, is shorter).
 */

let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

const input: CreateImageInput = {
  idempotencyKey: 'ib/b/r/a1',
  request: { prompt: 'a heron at dawn', model: 'flux-dev' },
  batchId: 'b',
  rowId: 'r',
  outDir: 'out',
  maxPollWaitMs: 30 * 60_000,
  progress: { creationId: 'cr_1', acceptedAtMs: 1_000_000 },
};

describe("a poll's Retry-After", () => {
  it('on an answer in flight: the activity retries no sooner', async () => {
    stub = await startStub(() => ({
      status: 200,
      headers: { 'retry-after': '5' },
      body: { id: 'cr_1', status: 'running' },
    }));
    const { activities } = activitiesFor(stub.url, { pollPlan: 'interval' });
    const { failure } = await runActivity(() => activities.createImage(input));
    expect(failure?.type).toBe(FailureType.Pending);
    expect(failure?.nextRetryDelay).toBe(5000);
  });

  it('without one: the poll interval, as before', async () => {
    stub = await startStub(() => ({ status: 200, body: { id: 'cr_1', status: 'running' } }));
    const { activities } = activitiesFor(stub.url, { pollPlan: 'interval' });
    const { failure } = await runActivity(() => activities.createImage(input));
    expect([failure?.type, failure?.nextRetryDelay]).toEqual([FailureType.Pending, 2000]);
  });
});
