import type { Dispatcher } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AuthDetail } from '../../src/api/contract';
import { BatchStopReason, FailureType, type BatchStopDetails } from '../../src/model';
import type { ManualClock, Simulator } from '../../src/simulator';
import {
  AUTH_STYLES,
  VARIANTS,
  credentialStrippingDispatcher,
  expectFailure,
  expectChargesConsistent,
  expectNoKeyLeak,
  harness,
  chargesOf,
  makeKey,
  request,
  startContractSim,
} from './helpers';

/**
 * The answers that stop a whole batch until a person acts (401, 403, 402), through the real activities, with
 * both ways of sending the key. 401/403 store nothing under the idempotency key: the same key works once the
 * batch is resumed. A 402 is judged: under all-judged the old key replays it, so resumption needs a new key.
 */

const TOP_UP_URL = 'https://portal.imagegen.example/billing/top-up';
let sim: Simulator;
let clock: ManualClock;
let nextAccount = 0;
const dispatchers: Dispatcher[] = [];
beforeAll(async () => {
  ({ sim, clock } = await startContractSim({ topUpUrl: TOP_UP_URL }));
});
afterAll(async () => {
  await Promise.all(dispatchers.map((d) => d.close()));
  await sim?.close();
});
beforeEach(() => {
  clock.advance(60_000);
});
afterEach(() => {
  expectChargesConsistent(sim);
  expectNoKeyLeak();
});

/** A fresh key of the main account, so that one test's revocations and budgets touch no other test. */
function freshKey(tag: string): { key: string; keyId: string } {
  const keyId = `key_${tag}_${++nextAccount}`;
  const key = makeKey(`${tag}${nextAccount}`);
  sim.addKey('acct_demo', keyId, key);
  return { key, keyId };
}

describe.each(AUTH_STYLES)('BatchStop, key via %s', (auth) => {
  const tag = (name: string) => `${auth}-${name}`;

  it.each(VARIANTS)(
    '401 authentication_required when no credential reaches the service (idempotency %s); the same key works once it does',
    async (variant) => {
      sim.setIdempotencyVariant(variant);
      const dispatcher = credentialStrippingDispatcher(sim.baseUrl);
      dispatchers.push(dispatcher);
      const stripped = harness(sim, clock, { authHeader: auth, dispatcher });
      const input = { idempotencyKey: tag(`noauth-${variant}`), request: request(tag(`noauth-${variant}`)) };
      const r = await stripped.run('submitCreation', [input]);
      const details = expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true);
      expect(details).toEqual({
        reason: BatchStopReason.AuthenticationRequired,
        httpStatus: 401,
        message: AuthDetail.AuthenticationRequired,
      });
      const poll = await stripped.run('pollCreation', [{ creationId: 'cr_0000000000AAAAAAAAAAAAAAAA' }]);
      expect(expectFailure(poll, FailureType.BatchStop, true)).toMatchObject({ reason: 'authentication_required' });

      const h = harness(sim, clock, { authHeader: auth });
      const ok = await h.run('submitCreation', [input]);
      expect(ok.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, input.idempotencyKey)?.chargedUsd).toBe(0.04);
    },
  );

  it('the model catalog needs the key too: GET /models with the key, and 401 without a valid one', async () => {
    const h = harness(sim, clock, { authHeader: auth });
    const models = await h.run('fetchModels', []);
    expect(models.value).toEqual([
      { id: 'flux-dev', name: 'Flux Dev', priceUsd: 0.04 },
      { id: 'flux-schnell', name: 'Flux Schnell', priceUsd: 0.01 },
      { id: 'sdxl', name: 'Stable Diffusion XL', priceUsd: 0.02 },
    ]);
    const bad = harness(sim, clock, { authHeader: auth, key: makeKey(`models${auth}`) });
    const refused = await bad.run('fetchModels', []);
    expect(expectFailure(refused, FailureType.BatchStop, true)).toMatchObject({ reason: 'api_key_invalid' });
  });

  it('401 api_key_invalid for an unknown key, on submit and on poll; nothing charged', async () => {
    const h = harness(sim, clock, { authHeader: auth, key: makeKey(`unknown${auth}`) });
    const input = { idempotencyKey: tag('unknown'), request: request(tag('unknown')) };
    const r = await h.run('submitCreation', [input]);
    expect(expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true)).toEqual({
      reason: BatchStopReason.ApiKeyInvalid,
      httpStatus: 401,
      message: AuthDetail.ApiKeyInvalid,
    });
    const poll = await h.run('pollCreation', [{ creationId: 'cr_0000000000AAAAAAAAAAAAAAAA' }]);
    expect(expectFailure(poll, FailureType.BatchStop, true)).toMatchObject({ reason: 'api_key_invalid' });
    expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
  });

  it('401 api_key_invalid for a revoked key, from the next request on', async () => {
    const { key, keyId } = freshKey('revoked');
    const h = harness(sim, clock, { authHeader: auth, key });
    const before = await h.run('submitCreation', [{ idempotencyKey: tag('rev-1'), request: request('r1') }]);
    expect(before.value?.creationId).toMatch(/^cr_/);
    sim.revokeKey(keyId);
    const input = { idempotencyKey: tag('rev-2'), request: request(tag('rev-2')) };
    const r = await h.run('submitCreation', [input]);
    expect(expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true)).toMatchObject({
      reason: BatchStopReason.ApiKeyInvalid,
      httpStatus: 401,
    });
    const poll = await h.run('pollCreation', [{ creationId: before.value?.creationId ?? '' }]);
    expect(expectFailure(poll, FailureType.BatchStop, true)).toMatchObject({ reason: 'api_key_invalid' });
    expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
  });

  it.each(VARIANTS)(
    '403 account_disabled (idempotency %s): nothing is stored, so once the account is enabled again the same key is accepted and charged once',
    async (variant) => {
      sim.setIdempotencyVariant(variant);
      const { key } = freshKey('disabled');
      const h = harness(sim, clock, { authHeader: auth, key });
      const input = { idempotencyKey: tag(`disabled-${variant}`), request: request(tag(`disabled-${variant}`)) };
      sim.setAccountDisabled('acct_demo', true);
      try {
        const r = await h.run('submitCreation', [input]);
        expect(expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true)).toEqual({
          reason: BatchStopReason.AccountDisabled,
          httpStatus: 403,
          message: AuthDetail.AccountDisabled,
        });
      } finally {
        sim.setAccountDisabled('acct_demo', false);
      }
      const ok = await h.run('submitCreation', [input]);
      expect(ok.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, input.idempotencyKey)).toMatchObject({ chargedUsd: 0.04, netCharged: 1 });
    },
  );

  it.each(VARIANTS)(
    '402 wallet (idempotency %s): required, balance and top-up URL; after a top-up a new key is accepted',
    async (variant) => {
      sim.setIdempotencyVariant(variant);
      const h = harness(sim, clock, { authHeader: auth });
      const old = { idempotencyKey: tag(`wallet-${variant}-1`), request: request(tag(`wallet-${variant}`)) };
      sim.setWallet('acct_demo', 0.01);
      let details: BatchStopDetails;
      try {
        const r = await h.run('submitCreation', [old]);
        details = expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true);
      } finally {
        sim.setWallet('acct_demo', 100);
      }
      expect(details).toMatchObject({
        reason: BatchStopReason.InsufficientBalance,
        httpStatus: 402,
        requiredUsd: 0.04,
        balanceUsd: 0.01,
        topUpUrl: TOP_UP_URL,
      });
      expect(details.monthlyCapUsd).toBeUndefined();
      expect(chargesOf(sim, old.idempotencyKey)).toBeUndefined();

      const replay = await h.run('submitCreation', [old]);
      if (variant === 'all-judged') {
        // The 402 was judged and stored: the old key keeps answering it even though the wallet is full now.
        expect(expectFailure(replay, FailureType.BatchStop, true)).toMatchObject({ reason: 'insufficient_balance' });
        expect(chargesOf(sim, old.idempotencyKey)).toBeUndefined();
      } else {
        expect(replay.value?.creationId).toMatch(/^cr_/);
      }
      const fresh = { ...old, idempotencyKey: tag(`wallet-${variant}-2`) };
      const ok = await h.run('submitCreation', [fresh]);
      expect(ok.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, fresh.idempotencyKey)).toMatchObject({ chargedUsd: 0.04, netCharged: 1 });
    },
  );

  it('402 monthly budget: reason, cap, required amount and top-up URL', async () => {
    const { key, keyId } = freshKey('budget');
    sim.setMonthlyBudget(keyId, 0.05);
    const h = harness(sim, clock, { authHeader: auth, key });
    const first = await h.run('submitCreation', [{ idempotencyKey: tag('b-1'), request: request('b1') }]);
    expect(first.value?.creationId).toMatch(/^cr_/);
    const input = { idempotencyKey: tag('b-2'), request: request(tag('b-2')) };
    const r = await h.run('submitCreation', [input]);
    expect(expectFailure<BatchStopDetails>(r, FailureType.BatchStop, true)).toMatchObject({
      reason: BatchStopReason.MonthlyBudgetExceeded,
      httpStatus: 402,
      monthlyCapUsd: 0.05,
      requiredUsd: 0.04,
      topUpUrl: TOP_UP_URL,
    });
    expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
    expect(sim.charges.byKey().find((k) => k.keyId === keyId)?.netUsd).toBe(0.04);
  });
});
