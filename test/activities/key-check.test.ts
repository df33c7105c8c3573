import { afterEach, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../src/ledger';
import {
  duplicateKeyOf,
  FailureType,
  KeyOutcome,
  type CreateImageInput,
  type KeyCheck,
  type KeyProgress,
} from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { tempLedger } from '../helpers/ledger';
import { activitiesFor, driveAttempts, runActivity } from './helpers';
import { settingsFingerprint } from '../../src/activities/service-proof';
import { defaultServiceConfig } from '../../src/config/service-config';

/**
 * The check that the service honours the key (CreateImageInput.proveKey, a batch's canary): once the key's first
 * submission was answered 202, the next attempt sends the same key and body again instead of the first poll. Each
 * answer of that second send, and what it leaves in the key's progress and the ledger store.
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
const error = (status: number, code: string, message = 'no') => ({ status, body: { error: { code, message } } });

function input(extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: KEY,
    request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    proveKey: true,
    ...extra,
  };
}

/**
 * A service that accepts the first POST as cr_1, answers every later POST from `checks` in turn (the last repeats),
 * and whose creations have failed (refunded) by their first poll: no image to save.
 */
async function setup(checks: StubReply[]) {
  ledger = await tempLedger();
  let posts = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST') {
      posts += 1;
      if (posts === 1) return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
      return checks[Math.min(posts - 2, checks.length - 1)]!;
    }
    return { status: 200, body: { id: req.url.split('/').pop(), status: 'failed', error: 'Generation failed.' } };
  });
  const clock = { t: 1_000_000 };
  const { activities } = activitiesFor(
    stub.url,
    { minPollIntervalMs: 1_000, maxAmbiguousTries: 3 },
    { now: () => clock.t, ledger },
  );
  const methods = () => stub!.requests.map((r) => `${r.method} ${r.url.replace(/^.*\/creations/, '')}`);
  return { activities, clock, methods };
}

/** The key's check as its activity's failure or result carries it. */
function checkOf(ended: {
  value?: { keyCheck?: KeyCheck };
  failure?: { details?: unknown[] | null };
}): KeyCheck | undefined {
  return ended.value?.keyCheck ?? (ended.failure?.details?.[1] as KeyProgress | undefined)?.keyCheck;
}

describe('createImage proving its key', () => {
  it('a 202 with the same creation: honoured, sent before the first poll, and the key polled as usual', async () => {
    const t = await setup([{ status: 202, body: { id: 'cr_1', status: 'queued' } }]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(ended.value).toMatchObject({ outcome: 'failed', creationId: 'cr_1' });
    expect(checkOf(ended)).toEqual({
      result: 'honoured',
      carrier: 'header Idempotency-Key',
      message: 'the key at header Idempotency-Key was honoured: the same creation came back (cr_1)',
    });
    expect(t.methods()).toEqual(['POST ', 'POST ', 'GET /cr_1']);
    // The check goes once the first answer is known, not a poll interval later; the first poll waits the interval.
    expect(ended.failures.slice(0, 2).map((f) => f.delay)).toEqual([1, 1_000]);
    // Both sends carried the key and the same body.
    const posts = stub!.requests.filter((r) => r.method === 'POST');
    expect(posts.map((p) => p.headers['idempotency-key'])).toEqual([KEY, KEY]);
    expect(posts[1]!.body).toBe(posts[0]!.body);
  });

  it('a 202 with another creation: not honoured; the second creation is in the store and the check never sent again', async () => {
    const t = await setup([{ status: 202, body: { id: 'cr_2', status: 'queued', cost_usd: 0.04 } }]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    const check = checkOf(ended)!;
    expect(check).toMatchObject({ result: 'not_honoured', duplicate: { creationId: 'cr_2', costUsd: 0.04 } });
    expect(check.message).toBe(
      'the service did not honour the idempotency key at header Idempotency-Key: every retry may pay twice; the ' +
        'check paid a second creation cr_2',
    );
    expect(check.advice).toContain('IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD');
    // Only the key's own creation is polled.
    expect(t.methods()).toEqual(['POST ', 'POST ', 'GET /cr_1']);
    const second = await ledger!.key(duplicateKeyOf(KEY, 'cr_2'));
    expect(second).toMatchObject({ creationId: 'cr_2', costUsd: 0.04, ended: { outcome: KeyOutcome.Duplicate } });
    // Spend reports count it: the key's own creation failed (refunded), the second one holds its charge.
    expect(await ledger!.summarize('batch', 'b')).toEqual([
      expect.objectContaining({ keys: 2, paid: 1, paidUsd: 0.04, refunded: 1 }),
    ]);
    // An attempt that lost the check's answer (a worker killed before its heartbeat) rebuilds it from the store.
    const before = { creationId: 'cr_1', acceptedAtMs: t.clock.t - 5_000 };
    const again = await runActivity(() => t.activities.createImage(input()), { heartbeatDetails: before });
    expect(checkOf(again)).toMatchObject({ result: 'not_honoured', duplicate: { creationId: 'cr_2' } });
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
  });

  it('found not honoured once, the next check under the same settings is not sent: a blind resume pays no more', async () => {
    const t = await setup([{ status: 202, body: { id: 'cr_2', status: 'queued', cost_usd: 0.04 } }]);
    await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
    // The next canary (another row) after a resume with nothing changed: its own submission, no check sent.
    const next = input({ rowId: 'r2', idempotencyKey: 'ib/b/r2/a1' });
    const ended = await driveAttempts(() => t.activities.createImage(next), t.clock);
    expect(checkOf(ended)).toMatchObject({
      result: 'not_honoured',
      message: expect.stringContaining('a check under these same settings found so before (batch b, row r)') as unknown,
      advice: expect.stringContaining('imagebatch doctor --spend-one') as unknown,
    });
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(3);
    // A proof made after it (doctor's paid test, the service changed): the check is sent again.
    await ledger!.proveService(
      settingsFingerprint(defaultServiceConfig({ baseUrl: stub!.url, minPollIntervalMs: 1_000, maxAmbiguousTries: 3 })),
      { by: 'doctor' },
      t.clock.t + 1,
    );
    t.clock.t += 10;
    const third = input({ rowId: 'r3', idempotencyKey: 'ib/b/r3/a1' });
    await driveAttempts(() => t.activities.createImage(third), t.clock);
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(5);
  });

  it('a 429: the check goes again later', async () => {
    const t = await setup([error(429, 'ERR_RATE_LIMIT'), { status: 202, body: { id: 'cr_1', status: 'queued' } }]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(checkOf(ended)?.result).toBe('honoured');
    expect(t.methods()).toEqual(['POST ', 'POST ', 'POST ', 'GET /cr_1']);
  });

  it.each<[string, StubReply, RegExp]>([
    ['a reset', { reset: true }, /no answer that can be read .*a second charge may have been made/],
    ['a 500', error(500, 'ERR_INTERNAL'), /no answer that can be read .*a second charge may have been made/],
    ['a 503 of a proxy', { status: 503, body: 'busy' }, /no answer that can be read \(HTTP 503/],
  ])('%s: unclear, never sent again', async (_, reply, words) => {
    const t = await setup([reply, { status: 202, body: { id: 'cr_9', status: 'queued' } }]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(ended.value?.outcome).toBe('failed');
    expect(checkOf(ended)).toMatchObject({ result: 'unclear', message: expect.stringMatching(words) as unknown });
    expect(t.methods()).toEqual(['POST ', 'POST ', 'GET /cr_1']);
  });

  it('a check whose answer was lost with its worker (its heartbeat too) is never sent again', async () => {
    const t = await setup([{ reset: true }, { status: 202, body: { id: 'cr_9', status: 'queued' } }]);
    const accepted = await runActivity(() => t.activities.createImage(input()));
    const before = accepted.heartbeats.at(-1);
    const checked = await runActivity(() => t.activities.createImage(input()), { heartbeatDetails: before });
    expect(checked.failure?.message).toContain('key checked (unclear)');
    // The next attempt starts from the details before the check: the store shows its send pending.
    const again = await runActivity(() => t.activities.createImage(input()), { heartbeatDetails: before });
    expect(checkOf(again)?.message).toContain('its answer is not known (the worker stopped)');
    expect(stub!.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
  });

  it.each([
    ['a refunded 503', { ...error(503, 'ERR_PROVIDER_UNAVAILABLE', 'busy'), headers: { 'retry-after': '1' } }, '503'],
    ['a refunded 502', error(502, 'ERR_GENERATION_FAILED', 'failed'), '502'],
    ['a 402', error(402, 'ERR_INSUFFICIENT_BALANCE', 'top up'), '402'],
  ])('%s: judged anew, not honoured, nothing held', async (_, reply, status) => {
    const t = await setup([reply]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    const check = checkOf(ended)!;
    expect(check.result).toBe('not_honoured');
    expect(check.duplicate).toBeUndefined();
    expect(check.message).toContain(`it was judged anew (HTTP ${status}`);
    expect(check.message).toContain('nothing held');
    expect(ended.value?.outcome).toBe('failed');
  });

  it('a 400: unclear (the creation did not come back), nothing charged by it', async () => {
    const t = await setup([error(400, 'ERR_INVALID_REQUEST', 'key already used')]);
    const ended = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(checkOf(ended)).toMatchObject({ result: 'unclear' });
    expect(checkOf(ended)?.message).toContain(
      'answered HTTP 400 ERR_INVALID_REQUEST: key already used, not its creation',
    );
  });

  it('a 401: a batch stop, the check still due; after the resume it is sent', async () => {
    const t = await setup([error(401, 'ERR_UNAUTHORIZED'), { status: 202, body: { id: 'cr_1', status: 'queued' } }]);
    const stopped = await driveAttempts(() => t.activities.createImage(input()), t.clock);
    expect(stopped.failure?.type).toBe(FailureType.BatchStop);
    const progress = stopped.failure?.details?.[1] as KeyProgress;
    expect(progress).toMatchObject({ creationId: 'cr_1' });
    expect(progress.keyCheck).toBeUndefined();
    const resumed = await driveAttempts(() => t.activities.createImage(input({ progress })), t.clock);
    expect(checkOf(resumed)?.result).toBe('honoured');
    expect(t.methods()).toEqual(['POST ', 'POST ', 'POST ', 'GET /cr_1']);
  });

  it('without proveKey nothing is sent twice', async () => {
    const t = await setup([{ status: 202, body: { id: 'cr_2', status: 'queued' } }]);
    const ended = await driveAttempts(() => t.activities.createImage(input({ proveKey: undefined })), t.clock);
    expect(ended.value?.keyCheck).toBeUndefined();
    expect(t.methods()).toEqual(['POST ', 'GET /cr_1']);
  });
});

describe("the settings' fingerprint of a proof", () => {
  it('leaves out where a schedule may read its file: a proof survives IMAGEBATCH_SCHEDULE_SOURCES', () => {
    const base = defaultServiceConfig({ baseUrl: 'http://127.0.0.1:1/v1' });
    const { scheduleSources: _ignored, ...before } = base;
    expect(settingsFingerprint({ ...base, scheduleSources: ['/srv/prompts'] })).toBe(settingsFingerprint(base));
    // The same fingerprint as a configuration from before the setting existed.
    expect(settingsFingerprint(before as typeof base)).toBe(settingsFingerprint(base));
    expect(settingsFingerprint({ ...base, idempotencyHeader: 'X-Other' })).not.toBe(settingsFingerprint(base));
  });
});
