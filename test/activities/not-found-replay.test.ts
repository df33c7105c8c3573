import { afterEach, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../src/ledger';
import { duplicateKeyOf, FailureType, KeyOutcome, type CreateImageInput, type KeyProgress } from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { tempLedger } from '../helpers/ledger';
import { activitiesFor, driveAttempts, runActivity } from './helpers';

/**
 * Past the window of reads that lag writes, the key of a creation not found is sent again, once: its creation back,
 * it is polled on in a new window; another creation, the service did not keep the key, and the batch stops (the row
 * ends lost after the resume); any other answer, the creation is lost, the message saying what was tried.
 */
let stub: StubServer | undefined;
let ledger: LedgerStore | undefined;
afterEach(async () => {
  await stub?.close();
  await ledger?.close();
  stub = undefined;
  ledger = undefined;
});

const KEY = 'ib/b/r/a1';
const notFound: StubReply = { status: 404, body: { error: { code: 'ERR_NOT_FOUND', message: 'No creation.' } } };
const failed: StubReply = { status: 200, body: { id: 'cr_1', status: 'failed', error: 'Generation failed.' } };

function input(extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: KEY,
    request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    ...extra,
  };
}

/**
 * A service that accepts the first POST as cr_1 and answers the key sent again from `replay`; its polls answer 404
 * until `foundAfter` polls (never by default), then that the creation failed (refunded: nothing to save).
 */
async function setup(replay: StubReply, foundAfter = Infinity) {
  ledger = await tempLedger();
  let posts = 0;
  let polls = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST') {
      posts += 1;
      return posts === 1 ? { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } } : replay;
    }
    polls += 1;
    return polls > foundAfter ? failed : notFound;
  });
  const clock = { t: 1_000_000 };
  const { activities } = activitiesFor(
    stub.url,
    { minPollIntervalMs: 1_000, notFoundWindowMs: 5_000, backoffBaseMs: 1_000, backoffMaxMs: 2_000 },
    { now: () => clock.t, ledger },
  );
  const posted = () => stub!.requests.filter((r) => r.method === 'POST').length;
  return { activities, clock, posted };
}

describe('createImage: the key sent again once its creation was not found for the window', () => {
  it('its own creation back: polled on in a new window, and found', async () => {
    const t = await setup({ status: 202, body: { id: 'cr_1', status: 'queued' } }, 8);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(ended.value).toMatchObject({ outcome: 'failed', creationId: 'cr_1', notFoundPolls: 8 });
    expect(t.posted()).toBe(2);
  });

  it('another creation: the batch stops (key_not_kept), the second creation is charged, the first ends lost', async () => {
    const t = await setup({ status: 202, body: { id: 'cr_2', status: 'queued', cost_usd: 0.04 } });
    const stopped = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(stopped.failure?.type).toBe(FailureType.BatchStop);
    expect(stopped.failure?.details?.[0]).toMatchObject({ reason: 'key_not_kept', httpStatus: 202 });
    expect(stopped.failure?.message).toMatch(
      /^HTTP 202 key_not_kept: the service did not keep the idempotency key at header Idempotency-Key: creation cr_1 answered 404 ERR_NOT_FOUND for \d+ s \(\d+ polls\), and the key sent again made a new creation cr_2 \(\$0\.04\): every retry may pay twice\./,
    );
    const progress = stopped.failure?.details?.[1] as KeyProgress;
    expect(progress.notFoundReplay).toMatchObject({ state: 'other', creationId: 'cr_2', costUsd: 0.04 });
    expect(await ledger!.key(duplicateKeyOf(KEY, 'cr_2'))).toMatchObject({ ended: { outcome: KeyOutcome.Duplicate } });
    expect(await ledger!.key(KEY)).toMatchObject({ creationId: 'cr_1', ended: { outcome: KeyOutcome.Lost } });
    // After the resume the row's key ends lost, nothing sent.
    const requests = stub!.requests.length;
    const resumed = await runActivity(() => t.activities.createImage(input({ progress })));
    expect(resumed.failure?.type).toBe(FailureType.CreationNotFound);
    expect(resumed.failure?.message).toContain('the service did not keep the idempotency key');
    expect(stub!.requests).toHaveLength(requests);
  });

  it.each<[string, StubReply, RegExp]>([
    [
      'a 402',
      { status: 402, body: { error: { code: 'ERR_INSUFFICIENT_BALANCE', message: 'top up' } } },
      /did not return it: HTTP 402 insufficient_balance: top up$/,
    ],
    [
      'a 400',
      { status: 400, body: { error: { code: 'ERR_INVALID_REQUEST', message: 'no' } } },
      /did not return it: HTTP 400 ERR_INVALID_REQUEST: no$/,
    ],
    [
      'a 500',
      { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'boom' } } },
      /got no answer that can be read \(HTTP 500 ERR_INTERNAL: boom\): a second charge may have been made$/,
    ],
  ])('%s: the creation is lost, the message saying what was tried', async (_, replay, words) => {
    const t = await setup(replay);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(ended.failure?.type).toBe(FailureType.CreationNotFound);
    expect(ended.failure?.message).toMatch(
      /^answered 404 ERR_NOT_FOUND for \d+ s \(\d+ polls\); the same key sent again /,
    );
    expect(ended.failure?.message).toMatch(words);
    expect(t.posted()).toBe(2);
    expect(await ledger!.key(KEY)).toMatchObject({ ended: { outcome: KeyOutcome.Lost } });
  });

  it('a key first sent longer ago than the idempotency window is not sent again: the creation is lost', async () => {
    const t = await setup({ status: 202, body: { id: 'cr_2', status: 'queued' } });
    const accepted = await runActivity(() => t.activities.createImage(input()));
    t.clock.t += 25 * 3_600_000; // past the service's 24 h (reconcile follows old creations)
    const due = { ...(accepted.heartbeats.at(-1) as object), notFoundReplay: { state: 'due', tried: 'answered 404' } };
    const ended = await runActivity(() => t.activities.createImage(input()), { heartbeatDetails: due });
    expect(ended.failure?.type).toBe(FailureType.CreationNotFound);
    expect(ended.failure?.message).toContain('longer ago than the service remembers keys (24 h');
    expect(t.posted()).toBe(1);
  });

  it('a replay whose answer was lost with its worker is never sent again: the creation is lost', async () => {
    const t = await setup({ status: 202, body: { id: 'cr_2', status: 'queued' } });
    const accepted = await runActivity(() => t.activities.createImage(input()));
    // The replay's send was written ahead, and the worker died before its answer: the store shows it pending.
    const stored = (await ledger!.key(KEY))!;
    const { request, requestSha256, fingerprint } = stored;
    await ledger!.append([
      { type: 'sending', batchId: 'b', rowId: 'r', idempotencyKey: KEY, request, requestSha256, fingerprint },
    ]);
    const due = {
      ...(accepted.heartbeats.at(-1) as object),
      notFoundReplay: { state: 'due', tried: 'answered 404 ERR_NOT_FOUND for 5 s (4 polls)' },
    };
    const again = await runActivity(() => t.activities.createImage(input()), { heartbeatDetails: due });
    expect(again.failure?.type).toBe(FailureType.CreationNotFound);
    expect(again.failure?.message).toBe(
      'answered 404 ERR_NOT_FOUND for 5 s (4 polls); the same key sent again got no answer known here (the worker ' +
        'stopped): a second charge may have been made',
    );
    expect(t.posted()).toBe(1);
  });
});
