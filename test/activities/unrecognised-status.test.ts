import { afterEach, describe, expect, it } from 'vitest';
import { BatchStopReason, FailureType, type CreateImageInput, type KeyProgress } from '../../src/model';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/**
 * A poll whose status is in no set while its record shows an image ends the key's activity with a BatchStop (the
 * batch pauses), its creation kept; once the word is configured as a success, the resumed row polls the same creation
 * and saves its image, submitting nothing again.
 */
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

describe('an unrecognised status with an image', () => {
  it('stops the batch with the creation kept; resumed with the word as a success, the same creation is saved', async () => {
    const clock = { t: 1_000_000 };
    let origin = '';
    stub = await startStub((req) => {
      if (req.method === 'POST') return { status: 202, body: { id: 'cr_1', status: 'Pending' } };
      if (req.url === '/f/cr_1.png') return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
      return { status: 200, body: { id: 'cr_1', status: 'Ready', result: { sample: `${origin}/f/cr_1.png` } } };
    });
    origin = stub.origin;
    const input: CreateImageInput = {
      idempotencyKey: 'ib.b.r.a1',
      request: { prompt: 'a fox', model: 'flux-dev' },
      batchId: 'b',
      rowId: 'r',
      outDir: 'out',
      maxPollWaitMs: 30 * 60_000,
    };
    const before = activitiesFor(stub.url, {}, { now: () => clock.t });
    let details: unknown;
    let stop: Awaited<ReturnType<typeof runActivity>>['failure'];
    for (let n = 0; n < 5 && !stop?.nonRetryable; n++) {
      const r = await runActivity(() => before.activities.createImage(input), { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      stop = r.failure;
      clock.t += Number(r.failure?.nextRetryDelay ?? 1000);
    }
    expect([stop?.type, stop?.nonRetryable]).toEqual([FailureType.BatchStop, true]);
    expect(stop?.details?.[0]).toMatchObject({ reason: BatchStopReason.UnrecognisedStatus });
    expect(String((stop?.details?.[0] as { message: string }).message)).toContain('IMAGEGEN_SUCCESS_STATUSES=');
    const progress = stop?.details?.[1] as KeyProgress;
    expect(progress.creationId).toBe('cr_1');

    // A minute later the worker restarted with the word as a success; the row resumes with what it knew of its key.
    clock.t += 60_000;
    const after = activitiesFor(stub.url, { successStatuses: ['succeeded', 'ready'] }, { now: () => clock.t });
    const resumed = await runActivity(() => after.activities.createImage({ ...input, progress }));
    expect(resumed.failure?.message).toBeUndefined();
    expect(resumed.value).toMatchObject({ outcome: 'succeeded', creationId: 'cr_1', images: [{ bytes: PNG.length }] });
    expect(stub.requests.filter((q) => q.method === 'POST')).toHaveLength(1);
  });
});
