import { afterEach, describe, expect, it } from 'vitest';
import { BatchStopReason, FailureType, type CreateImageInput, type KeyProgress } from '../../src/model';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/**
 * A poll whose status is in no set while its record holds an image, judged by its bytes, ends the key's activity with a
 * BatchStop (the batch pauses), its creation kept; once the word is configured as a success, the resumed row polls the
 * same creation and saves its image, submitting nothing again. A record whose URLs are no image (issue #42: a logs URL,
 * the API's own links) is waited out, its URLs judged once for the word, without the API key, nothing saved.
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

describe('an unrecognised status whose URLs are no image (issue #42)', () => {
  const input: CreateImageInput = {
    idempotencyKey: 'ib/b/r/a1',
    request: { prompt: 'a fox', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    progress: { creationId: 'cr_1', acceptedAtMs: 1_000_000 },
  };

  it('is waited out, its URLs judged once for the word; the success that follows is saved', async () => {
    const clock = { t: 1_000_000 };
    let polls = 0;
    let origin = '';
    stub = await startStub((req) => {
      if (req.url === '/logs/cr_1.txt')
        return { status: 200, headers: { 'content-type': 'text/plain' }, body: 'running\n' };
      if (req.url === '/f/cr_1.png') return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
      if (req.url.endsWith('/creations/cr_1/cancel'))
        return { status: 401, body: { detail: 'authentication_required' } };
      polls += 1;
      const links = { logs: `${origin}/logs/cr_1.txt`, urls: { cancel: `${origin}/v1/creations/cr_1/cancel` } };
      if (polls < 3) return { status: 200, body: { id: 'cr_1', status: 'uploading', images: [], ...links } };
      return {
        status: 200,
        body: { id: 'cr_1', status: 'succeeded', images: [{ url: `${origin}/f/cr_1.png` }], ...links },
      };
    });
    origin = stub.origin;
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    let details: unknown;
    const ended = [];
    for (let n = 0; n < 3; n++) {
      const r = await runActivity(() => activities.createImage(input), { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      ended.push(r.failure?.type ?? r.value?.outcome);
      clock.t += Number(r.failure?.nextRetryDelay ?? 0);
    }
    expect(ended).toEqual([FailureType.Pending, FailureType.Pending, 'succeeded']);
    // Judged at the first poll that showed the word, not again at the second; the API key went to none of them.
    const judged = stub.requests.filter((q) => q.url === '/logs/cr_1.txt' || q.url.endsWith('/cancel'));
    expect(judged.map((q) => q.url)).toEqual(['/logs/cr_1.txt', '/v1/creations/cr_1/cancel']);
    expect(judged.every((q) => q.headers.authorization === undefined && q.headers['x-api-key'] === undefined)).toBe(
      true,
    );
    const checks = (details as KeyProgress).statusChecks;
    expect(checks?.map((c) => [c.status, c.image, c.why?.startsWith('logs (discovered): not an image')])).toEqual([
      ['uploading', undefined, true],
    ]);
  });

  it('with something at a configured image path that is no image: a stop that never offers the word as a success', async () => {
    stub = await startStub((req) =>
      req.url === '/out/cr_1'
        ? { status: 404, body: 'not yet' }
        : { status: 200, body: { id: 'cr_1', status: 'uploading', output: `${stub?.origin ?? ''}/out/cr_1` } },
    );
    const { activities } = activitiesFor(stub.url);
    const { failure } = await runActivity(() => activities.createImage(input));
    expect([failure?.type, failure?.nonRetryable]).toEqual([FailureType.BatchStop, true]);
    const message = String((failure?.details?.[0] as { message: string }).message);
    expect(message).toContain(
      'holds something at the image path output, but nothing it holds is an image (output: HTTP 404)',
    );
    expect(message).not.toContain('IMAGEGEN_SUCCESS_STATUSES');
    expect(message).not.toMatch(/holds an image/);
  });

  it('a URL that gave no answer (a 503, a reset) is judged again at a later poll: its image then stops the batch', async () => {
    const clock = { t: 1_000_000 };
    let sniffs = 0;
    let origin = '';
    stub = await startStub((req) => {
      if (req.url === '/f/cr_1.png') {
        sniffs += 1;
        if (sniffs === 1) return { status: 503, headers: { 'retry-after': '1' }, body: 'busy' };
        return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
      }
      return { status: 200, body: { id: 'cr_1', status: 'Ready', result: { sample: `${origin}/f/cr_1.png` } } };
    });
    origin = stub.origin;
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    let details: unknown;
    const ended = [];
    for (let n = 0; n < 3 && ended.at(-1) !== FailureType.BatchStop; n++) {
      const r = await runActivity(() => activities.createImage(input), { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      ended.push(r.failure?.type ?? r.value?.outcome);
      clock.t += Number(r.failure?.nextRetryDelay ?? 0);
    }
    expect(ended).toEqual([FailureType.Pending, FailureType.BatchStop]);
    expect(sniffs).toBe(2);
  });

  it('a URL that keeps giving no answer is judged a few times, then the word is waited out', async () => {
    const clock = { t: 1_000_000 };
    let sniffs = 0;
    let origin = '';
    stub = await startStub((req) => {
      if (req.url === '/f/cr_1.png') {
        sniffs += 1;
        return { status: 502, body: 'bad gateway' };
      }
      return { status: 200, body: { id: 'cr_1', status: 'Ready', result: { sample: `${origin}/f/cr_1.png` } } };
    });
    origin = stub.origin;
    const { activities } = activitiesFor(stub.url, {}, { now: () => clock.t });
    let details: unknown;
    for (let n = 0; n < 6; n++) {
      const r = await runActivity(() => activities.createImage(input), { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      expect(r.failure?.type).toBe(FailureType.Pending);
      clock.t += Number(r.failure?.nextRetryDelay ?? 0);
    }
    expect(sniffs).toBe(3);
  });
});
