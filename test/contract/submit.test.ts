import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/api/contract';
import { FailureType, type RefundedDetails, type RejectedDetails } from '../../src/model';
import { FaultKind, type ManualClock, type Simulator } from '../../src/simulator';
import {
  AUTH_STYLES,
  MAIN_ACCOUNT,
  NAMINGS,
  VARIANTS,
  expectFailure,
  expectChargesConsistent,
  expectNoKeyLeak,
  harness,
  chargesOf,
  request,
  retryDelayOf,
  startContractSim,
} from './helpers';

/**
 * submitCreation against the simulator: acceptance and replay, 429s, unknown outcomes, refunds and rejections,
 * for both idempotency variants and both ways of sending the key.
 */

let sim: Simulator;
let clock: ManualClock;
beforeAll(async () => {
  ({ sim, clock } = await startContractSim());
});
afterAll(async () => {
  await sim?.close();
});
beforeEach(() => {
  // Let every creation of an earlier test finish, and every wait it was given pass.
  clock.advance(60_000);
  sim.setLimits({ requestsPerSecond: 1000, burst: 1000, accountConcurrency: null });
});
afterEach(() => {
  expectChargesConsistent(sim);
  expectNoKeyLeak();
});

const PRICE = 0.04;

describe.each(VARIANTS.flatMap((variant) => AUTH_STYLES.map((auth) => ({ variant, auth }))))(
  'submitCreation, idempotency $variant, key via $auth',
  ({ variant, auth }) => {
    const tag = (name: string) => `${variant}-${auth}-${name}`;
    beforeEach(() => {
      sim.setIdempotencyVariant(variant);
      sim.setStatusNaming('default');
    });

    it.each(NAMINGS)(
      'accepted (202) in naming %s; a replay with the same key gives the same creation and charges once',
      async (naming) => {
        sim.setStatusNaming(naming);
        const h = harness(sim, clock, { authHeader: auth });
        const key = tag(`accept-${naming}`);
        const input = { idempotencyKey: key, request: request(key) };
        const wallet = sim.walletUsd(MAIN_ACCOUNT);
        const first = await h.run('submitCreation', [input]);
        expect(first.value).toMatchObject({ status: naming === 'default' ? 'queued' : 'pending', costUsd: PRICE });
        expect(first.value?.creationId).toMatch(/^cr_/);
        expect(first.value?.replayed).toBeUndefined();

        clock.advance(500);
        const again = await h.run('submitCreation', [input]);
        expect(again.value?.creationId).toBe(first.value?.creationId);
        expect(again.value?.replayed).toBe(true);

        const charged = chargesOf(sim, key);
        expect(charged?.creationIds).toEqual([first.value?.creationId]);
        expect(charged?.chargedUsd).toBe(PRICE);
        expect(sim.walletUsd(MAIN_ACCOUNT)).toBeCloseTo(wallet - PRICE, 9);
      },
    );

    it('two submissions with one key at once get one creation, charged once', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = { idempotencyKey: tag('twice'), request: request(tag('twice')) };
      // The first answer is held back 30 ms (real time), so that the second request arrives while it is pending.
      sim.scriptFor(tag('twice'), [{ kind: FaultKind.Slow, delayMs: 30 }]);
      const [a, b] = await Promise.all([h.run('submitCreation', [input]), h.run('submitCreation', [input])]);
      expect(a.value?.creationId).toMatch(/^cr_/);
      expect(b.value?.creationId).toBe(a.value?.creationId);
      expect([a.value?.replayed, b.value?.replayed].sort()).toEqual([true, undefined]);
      expect(chargesOf(sim, input.idempotencyKey)).toMatchObject({
        creationIds: [a.value?.creationId],
        chargedUsd: PRICE,
      });
    });

    it('429 ERR_RATE_LIMIT -> RateLimited after Retry-After; the key is held locally; then the same key is charged once', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      sim.setLimits({ requestsPerSecond: 0.5, burst: 1 });
      const ok = await h.run('submitCreation', [{ idempotencyKey: tag('rl-a'), request: request('rl-a') }]);
      expect(ok.value?.creationId).toMatch(/^cr_/);

      const input = { idempotencyKey: tag('rl-b'), request: request(tag('rl-b')) };
      const limited = await h.run('submitCreation', [input]);
      const details = expectFailure(limited, FailureType.RateLimited, false);
      expect(limited.failure?.nextRetryDelay).toBe(2000);
      expect(details).toMatchObject({ httpStatus: 429, code: ErrorCode.RateLimit, retryAfterMs: 2000 });
      expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();

      // Before the wait is over, nothing is sent: the process holds the key.
      clock.advance(1000);
      const held = await h.run('submitCreation', [input]);
      expectFailure(held, FailureType.RateLimited, false);
      expect(held.failure?.details?.[0]).toMatchObject({ local: true, retryAfterMs: 1000 });
      expect(held.failure?.nextRetryDelay).toBe(1000);

      clock.advance(1000);
      const retried = await h.run('submitCreation', [input]);
      expect(retried.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, input.idempotencyKey)?.creationIds).toEqual([retried.value?.creationId]);
    });

    it('429 ERR_QUOTA_EXCEEDED -> RateLimited with scope and reason, after Retry-After; then charged once', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      sim.setLimits({ accountConcurrency: 1 });
      const first = await h.run('submitCreation', [{ idempotencyKey: tag('q-a'), request: request('q-a') }]);
      expect(first.value?.creationId).toMatch(/^cr_/);

      const input = { idempotencyKey: tag('q-b'), request: request(tag('q-b')) };
      const quota = await h.run('submitCreation', [input]);
      const details = expectFailure(quota, FailureType.RateLimited, false);
      // The creation in flight finishes 4 s after its acceptance: Retry-After says so.
      expect(quota.failure?.nextRetryDelay).toBe(4000);
      expect(details).toMatchObject({
        httpStatus: 429,
        code: ErrorCode.QuotaExceeded,
        scope: 'account',
        reason: 'concurrency_limit',
      });
      expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();

      clock.advance(4000);
      const retried = await h.run('submitCreation', [input]);
      expect(retried.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, input.idempotencyKey)?.chargedUsd).toBe(PRICE);
    });

    it('500 before the charge -> Ambiguous with the same key; retries never charge twice, and end as Unknown if the key keeps answering 500', async () => {
      const h = harness(sim, clock, { authHeader: auth, config: { maxAmbiguousTries: 3 } });
      const input = { idempotencyKey: tag('i500b'), request: request(tag('i500b')) };
      sim.scriptFor(tag('i500b'), [FaultKind.InternalBeforeCharge]);
      const first = await h.run('submitCreation', [input]);
      const details = expectFailure(first, FailureType.Ambiguous, false);
      expect(details).toMatchObject({ httpStatus: 500 });
      expect(first.failure?.nextRetryDelay).toBe(750); // backoff 1000 ms, jitter 0.5
      expect(first.heartbeats).toEqual([{ ambiguousTries: 1, mayBeSent: true }]);
      expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();

      clock.advance(750);
      const second = await h.run('submitCreation', [input], { heartbeatDetails: first.heartbeats[0] });
      if (variant === 'accepted-only') {
        // Only acceptances are stored: the retry is judged afresh, accepted and charged once.
        expect(second.value?.creationId).toMatch(/^cr_/);
        expect(chargesOf(sim, input.idempotencyKey)?.creationIds).toEqual([second.value?.creationId]);
        expect(chargesOf(sim, input.idempotencyKey)?.chargedUsd).toBe(PRICE);
      } else {
        // The stored 500 is replayed: still unknown, still nothing charged; the bound ends the attempt.
        expectFailure(second, FailureType.Ambiguous, false);
        expect(second.heartbeats).toEqual([{ ambiguousTries: 2, mayBeSent: true }]);
        clock.advance(retryDelayOf(second));
        const third = await h.run('submitCreation', [input], { heartbeatDetails: second.heartbeats[0] });
        const unknown = expectFailure(third, FailureType.Unknown, true);
        expect(unknown).toMatchObject({ idempotencyKey: input.idempotencyKey, tries: 3 });
        expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
      }
    });

    it('500 after the charge -> Ambiguous with the same key; the retry charges nothing more', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = { idempotencyKey: tag('i500a'), request: request(tag('i500a')) };
      sim.scriptFor(tag('i500a'), [FaultKind.InternalAfterCharge]);
      const first = await h.run('submitCreation', [input]);
      expectFailure(first, FailureType.Ambiguous, false);
      const charged = chargesOf(sim, input.idempotencyKey);
      expect(charged?.creationIds).toHaveLength(1);
      expect(charged?.chargedUsd).toBe(PRICE);

      clock.advance(retryDelayOf(first));
      const second = await h.run('submitCreation', [input], { heartbeatDetails: first.heartbeats[0] });
      if (variant === 'accepted-only') {
        // The acceptance was stored: the retry learns the creation that was charged.
        expect(second.value).toMatchObject({ creationId: charged?.creationIds[0], replayed: true });
      } else {
        expectFailure(second, FailureType.Ambiguous, false);
      }
      expect(chargesOf(sim, input.idempotencyKey)).toMatchObject({
        creationIds: charged?.creationIds,
        chargedUsd: PRICE,
      });
    });

    it('connection reset after the commit -> Ambiguous; the same key then finds the charged creation', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = { idempotencyKey: tag('reset'), request: request(tag('reset')) };
      sim.scriptFor(tag('reset'), [FaultKind.ResetAfterCommit]);
      const first = await h.run('submitCreation', [input]);
      const details = expectFailure(first, FailureType.Ambiguous, false);
      expect(details.httpStatus).toBeUndefined();
      const charged = chargesOf(sim, input.idempotencyKey);
      expect(charged?.creationIds).toHaveLength(1);

      clock.advance(retryDelayOf(first));
      const second = await h.run('submitCreation', [input], { heartbeatDetails: first.heartbeats[0] });
      expect(second.value).toMatchObject({ creationId: charged?.creationIds[0], replayed: true });
      expect(chargesOf(sim, input.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netCharged: 1 });
    });

    it('502 -> Refunded; a new key succeeds (and under all-judged the old key replays the 502)', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const old = { idempotencyKey: tag('g502-1'), request: request(tag('g502')) };
      sim.scriptFor(tag('g502'), [FaultKind.GenerationFailed]);
      const refunded = await h.run('submitCreation', [old]);
      const details = expectFailure<RefundedDetails>(refunded, FailureType.Refunded, true);
      expect(details).toMatchObject({ httpStatus: 502, code: ErrorCode.GenerationFailed });
      expect(details.retryAfterMs).toBeUndefined();
      expect(chargesOf(sim, old.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, refundedUsd: PRICE, netUsd: 0 });

      if (variant === 'all-judged') {
        const replay = await h.run('submitCreation', [old]);
        expectFailure(replay, FailureType.Refunded, true);
        expect(chargesOf(sim, old.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netUsd: 0 });
      }
      const fresh = { ...old, idempotencyKey: tag('g502-2') };
      const accepted = await h.run('submitCreation', [fresh]);
      expect(accepted.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, fresh.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netCharged: 1 });
    });

    it('503 -> Refunded with retryAfterMs; after the wait a new key succeeds (under all-judged the old key replays the 503)', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const old = { idempotencyKey: tag('p503-1'), request: request(tag('p503')) };
      sim.scriptFor(tag('p503'), [FaultKind.ProviderUnavailable]);
      const refunded = await h.run('submitCreation', [old]);
      const details = expectFailure<RefundedDetails>(refunded, FailureType.Refunded, true);
      expect(details).toMatchObject({ httpStatus: 503, code: ErrorCode.ProviderUnavailable, retryAfterMs: 2000 });
      expect(chargesOf(sim, old.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netUsd: 0 });

      const fresh = { ...old, idempotencyKey: tag('p503-2') };
      // Within the Retry-After the process sends nothing for this key.
      const early = await h.run('submitCreation', [fresh]);
      expectFailure(early, FailureType.RateLimited, false);
      expect(early.failure?.details?.[0]).toMatchObject({ local: true });
      expect(chargesOf(sim, fresh.idempotencyKey)).toBeUndefined();
      clock.advance(2000);

      if (variant === 'all-judged') {
        // Why the next attempt needs a new key: the old one answers the stored 503 forever.
        const replay = await h.run('submitCreation', [old]);
        expect(expectFailure<RefundedDetails>(replay, FailureType.Refunded, true)).toMatchObject({
          httpStatus: 503,
          retryAfterMs: 2000,
        });
        expect(chargesOf(sim, old.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netUsd: 0 });
        clock.advance(2000);
      }
      const accepted = await h.run('submitCreation', [fresh]);
      expect(accepted.value?.creationId).toMatch(/^cr_/);
      expect(chargesOf(sim, fresh.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netCharged: 1 });
    });

    it('400 with field errors -> Rejected with every field problem; nothing charged', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = {
        idempotencyKey: tag('bad'),
        request: { ...request(tag('bad')), width: 1000, num_images: 9 },
      };
      for (let i = 0; i < 2; i++) {
        const r = await h.run('submitCreation', [input]);
        const details = expectFailure<RejectedDetails>(r, FailureType.Rejected, true);
        expect(details).toMatchObject({ httpStatus: 400, code: ErrorCode.InvalidRequest });
        expect(details.fieldErrors).toEqual([
          { field: 'width', message: 'must be a multiple of 64' },
          { field: 'num_images', message: 'must be between 1 and 4' },
        ]);
      }
      expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
    });

    it('the same key with another body -> Rejected naming the Idempotency-Key; nothing charged again', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = { idempotencyKey: tag('mismatch'), request: request(tag('mismatch')) };
      const ok = await h.run('submitCreation', [input]);
      expect(ok.value?.creationId).toMatch(/^cr_/);
      const other = await h.run('submitCreation', [{ ...input, request: { ...input.request, seed: 7 } }]);
      const details = expectFailure<RejectedDetails>(other, FailureType.Rejected, true);
      expect(details.fieldErrors[0]?.field).toBe('Idempotency-Key');
      expect(chargesOf(sim, input.idempotencyKey)).toMatchObject({ chargedUsd: PRICE, netCharged: 1 });
    });

    it('404 model -> Rejected with ERR_MODEL_NOT_FOUND; nothing charged', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const input = { idempotencyKey: tag('nomodel'), request: { ...request(tag('nomodel')), model: 'no-such-model' } };
      const r = await h.run('submitCreation', [input]);
      const details = expectFailure<RejectedDetails>(r, FailureType.Rejected, true);
      expect(details).toMatchObject({ httpStatus: 404, code: ErrorCode.ModelNotFound, fieldErrors: [] });
      expect(details.message).toContain('no-such-model');
      expect(chargesOf(sim, input.idempotencyKey)).toBeUndefined();
    });
  },
);
