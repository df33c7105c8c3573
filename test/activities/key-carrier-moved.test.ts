import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput } from '../../src/model';
import { lazyTempLedger } from '../helpers/ledger';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/**
 * A key whose send's answer is not known, sent again after the worker's settings moved the key (from the header to a
 * body field, or to another header): the service never saw the key where it is now, so the send would be judged as
 * new and, if the first was charged, paid twice. The store refuses it, as it refuses the key with another body: the
 * row is reported unknown and nothing is sent.
 */
let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

const INPUT: CreateImageInput = {
  idempotencyKey: 'ib/b/r/a1',
  request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
  batchId: 'b',
  rowId: 'r',
  outDir: 'out',
  maxPollWaitMs: 30 * 60_000,
};

describe('a key sent again after its carrier moved', () => {
  it.each([
    ['to a body field', { idempotencyField: 'metadata.idempotency_key' }],
    ['to another header', { idempotencyHeader: 'X-Request-Id' }],
  ])('%s: not sent; the row is reported unknown', async (_, moved) => {
    let posts = 0;
    stub = await startStub((req) => {
      if (req.method !== 'POST') return { status: 404, body: {} };
      posts += 1;
      return { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'Internal error.' } } };
    });
    const ledger = lazyTempLedger();
    const before = activitiesFor(stub.url, {}, { ledger });
    const first = await runActivity(() => before.activities.createImage(INPUT));
    expect(first.failure?.type).toBe(FailureType.Ambiguous);
    expect(posts).toBe(1);

    const after = activitiesFor(stub.url, moved, { ledger });
    const again = await runActivity(() => after.activities.createImage(INPUT));
    expect(posts).toBe(1);
    expect(again.failure?.type).toBe(FailureType.Unknown);
    expect(again.failure?.message).toMatch(/with the key elsewhere/);
  });

  it('the same carrier sends the key again, as before', async () => {
    let posts = 0;
    stub = await startStub(() => {
      posts += 1;
      return { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'Internal error.' } } };
    });
    const ledger = lazyTempLedger();
    const config = { idempotencyField: 'metadata.idempotency_key' };
    await runActivity(() => activitiesFor(stub!.url, config, { ledger }).activities.createImage(INPUT));
    await runActivity(() => activitiesFor(stub!.url, config, { ledger }).activities.createImage(INPUT));
    expect(posts).toBe(2);
  });
});
