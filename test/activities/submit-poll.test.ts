import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import { FailureType } from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

const servers: StubServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function stub(reply: (i: number) => StubReply) {
  const server = await startStub((_r, i) => reply(i));
  servers.push(server);
  return server;
}

const input = { idempotencyKey: 'b1-r1-1', request: { prompt: 'a fox', model: 'flux-dev' } };
const env = (code: string, message = 'm', details?: unknown) => ({ error: { code, message, details } });

describe('submitCreation', () => {
  it('returns the accepted creation', async () => {
    const server = await stub(() => ({ status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } }));
    const { activities } = activitiesFor(server.url);
    const r = await runActivity(() => activities.submitCreation(input));
    expect(r.value).toEqual({ creationId: 'cr_1', status: 'queued', costUsd: 0.04 });
    expect(r.heartbeats).toEqual([]);
  });

  it('an unknown outcome is retryable with the same key: backoff in nextRetryDelay, the count heartbeated', async () => {
    const server = await stub(() => ({ status: 500, body: env(ErrorCode.Internal, 'oops') }));
    const { activities } = activitiesFor(server.url, { backoffBaseMs: 1000, backoffMaxMs: 60_000 });
    const first = await runActivity(() => activities.submitCreation(input));
    expect(first.failure?.type).toBe(FailureType.Ambiguous);
    expect(first.failure?.nonRetryable).toBe(false);
    expect(first.failure?.nextRetryDelay).toBe(750); // 1000 ms ceiling, jitter 0.5 -> 500 + 250
    // A send with no readable answer may have left: the key can no longer end not_sent.
    expect(first.heartbeats).toEqual([{ ambiguousTries: 1, mayBeSent: true }]);
    const third = await runActivity(() => activities.submitCreation(input), {
      heartbeatDetails: { ambiguousTries: 2 },
    });
    expect(third.failure?.nextRetryDelay).toBe(3000); // ceiling 4000
    expect(third.heartbeats).toEqual([{ ambiguousTries: 3, mayBeSent: true }]);
  });

  it('ends as Unknown, non-retryable, with the key, the tries and the last error, after the bound', async () => {
    const server = await stub(() => ({ reset: true }));
    const { activities } = activitiesFor(server.url, { maxAmbiguousTries: 4 });
    const r = await runActivity(() => activities.submitCreation(input), { heartbeatDetails: { ambiguousTries: 3 } });
    expect(r.failure?.type).toBe(FailureType.Unknown);
    expect(r.failure?.nonRetryable).toBe(true);
    expect(r.failure?.details?.[0]).toMatchObject({ idempotencyKey: 'b1-r1-1', tries: 4 });
    expect((r.failure?.details?.[0] as { lastError: string }).lastError).toMatch(/socket|closed|reset/i);
  });

  it('a malformed 202 counts as unknown too', async () => {
    const server = await stub(() => ({ status: 202, body: '<html>' }));
    const { activities } = activitiesFor(server.url);
    const r = await runActivity(() => activities.submitCreation(input));
    expect(r.failure?.type).toBe(FailureType.Ambiguous);
    expect(r.heartbeats).toEqual([{ ambiguousTries: 1, mayBeSent: true }]);
  });

  it.each<[string, StubReply, string, boolean, unknown]>([
    [
      '429',
      { status: 429, headers: { 'retry-after': '2' }, body: env(ErrorCode.RateLimit) },
      FailureType.RateLimited,
      false,
      2000,
    ],
    ['502', { status: 502, body: env(ErrorCode.GenerationFailed) }, FailureType.Refunded, true, undefined],
    [
      '503',
      { status: 503, headers: { 'retry-after': '9' }, body: env(ErrorCode.ProviderUnavailable) },
      FailureType.Refunded,
      true,
      undefined,
    ],
    [
      '400',
      { status: 400, body: env(ErrorCode.InvalidRequest, 'bad', { errors: [{ field: 'prompt', message: 'empty' }] }) },
      FailureType.Rejected,
      true,
      undefined,
    ],
    ['404', { status: 404, body: env(ErrorCode.ModelNotFound) }, FailureType.Rejected, true, undefined],
    ['401', { status: 401, body: { detail: 'api_key_invalid' } }, FailureType.BatchStop, true, undefined],
    ['403', { status: 403, body: { detail: 'account_disabled' } }, FailureType.BatchStop, true, undefined],
    [
      '402',
      { status: 402, body: env(ErrorCode.InsufficientBalance, 'pay', { required: 0.04, top_up_url: 'u' }) },
      FailureType.BatchStop,
      true,
      undefined,
    ],
  ])('%s -> its failure type', async (_name, reply, type, nonRetryable, delay) => {
    const server = await stub(() => reply);
    const { activities } = activitiesFor(server.url);
    const r = await runActivity(() => activities.submitCreation(input), { heartbeatDetails: { ambiguousTries: 2 } });
    expect(r.failure?.type).toBe(type);
    expect(r.failure?.nonRetryable).toBe(nonRetryable);
    expect(r.failure?.nextRetryDelay ?? undefined).toBe(delay);
    expect(r.heartbeats).toEqual([]); // the count of unknown outcomes stays as it was
  });

  it('503 carries retryAfterMs for the workflow; 402 carries the amounts', async () => {
    const server = await stub((i) =>
      i === 0
        ? { status: 503, headers: { 'retry-after': '9' }, body: env(ErrorCode.ProviderUnavailable, 'down') }
        : {
            status: 402,
            body: env(ErrorCode.InsufficientBalance, 'pay', { required: 0.04, balance: 0, top_up_url: 'https://t' }),
          },
    );
    const { activities, clock } = activitiesFor(server.url);
    const refunded = await runActivity(() => activities.submitCreation(input));
    expect(refunded.failure?.details).toEqual([
      { httpStatus: 503, code: ErrorCode.ProviderUnavailable, message: 'down', retryAfterMs: 9000 },
    ]);
    clock.t += 9000;
    const stop = await runActivity(() => activities.submitCreation(input));
    expect(stop.failure?.details).toEqual([
      {
        reason: 'insufficient_balance',
        httpStatus: 402,
        message: 'pay',
        requiredUsd: 0.04,
        balanceUsd: 0,
        topUpUrl: 'https://t',
      },
    ]);
  });

  it('a malformed key is a non-retryable Config failure and nothing is sent', async () => {
    const server = await stub(() => ({ status: 202, body: { id: 'x' } }));
    const { activities } = activitiesFor(server.url, {}, { apiKey: () => 'img_live_tooshort' });
    const r = await runActivity(() => activities.submitCreation(input));
    expect(r.failure?.type).toBe(FailureType.Config);
    expect(r.failure?.nonRetryable).toBe(true);
    expect(r.failure?.message).toMatch(/40 expected/);
    expect(server.requests).toHaveLength(0);
  });
});

describe('pollCreation and fetchModels', () => {
  it('an in-flight creation is Pending with the poll interval; an ended one is returned', async () => {
    const server = await stub((i) =>
      i === 0
        ? { status: 200, body: { id: 'c', status: 'running' } }
        : { status: 200, body: { id: 'c', status: 'failed', error: FailureMessage.TimedOut, cost_usd: 0.04 } },
    );
    const { activities, clock } = activitiesFor(server.url, { minPollIntervalMs: 2500 });
    const pending = await runActivity(() => activities.pollCreation({ creationId: 'c' }));
    expect(pending.failure?.type).toBe(FailureType.Pending);
    expect(pending.failure?.nonRetryable).toBe(false);
    expect(pending.failure?.nextRetryDelay).toBe(2500);
    clock.t += 2500;
    const ended = await runActivity(() => activities.pollCreation({ creationId: 'c' }));
    expect(ended.value).toEqual({
      outcome: 'failed',
      status: 'failed',
      error: FailureMessage.TimedOut,
      retryable: true,
      costUsd: 0.04,
    });
  });

  it('404 is CreationNotFound; 401 BatchStop; 429 RateLimited; a reset is retryable with backoff and counted', async () => {
    const replies: StubReply[] = [
      { status: 404, body: env(ErrorCode.NotFound) },
      { status: 401, body: { detail: 'authentication_required' } },
      { status: 429, headers: { 'retry-after': '3' }, body: env(ErrorCode.RateLimit) },
      { reset: true },
    ];
    const server = await stub((i) => replies[i] ?? { status: 500 });
    const { activities } = activitiesFor(server.url);
    const types = [];
    for (const id of ['a', 'b', 'c', 'd']) {
      const r = await runActivity(() => activities.pollCreation({ creationId: id }), {
        heartbeatDetails: id === 'd' ? { ambiguousTries: 1 } : undefined,
      });
      types.push([r.failure?.type, r.failure?.nonRetryable, r.failure?.nextRetryDelay ?? undefined, r.heartbeats]);
    }
    expect(types).toEqual([
      [FailureType.CreationNotFound, true, undefined, []],
      [FailureType.BatchStop, true, undefined, []],
      [FailureType.RateLimited, false, 3000, []],
      [FailureType.Ambiguous, false, 1500, [{ ambiguousTries: 2 }]],
    ]);
  });

  it('fetchModels maps price_usd to priceUsd', async () => {
    const server = await stub(() => ({
      status: 200,
      body: { data: [{ id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 }] },
    }));
    const { activities } = activitiesFor(server.url);
    const r = await runActivity(() => activities.fetchModels());
    expect(r.value).toEqual([{ id: 'flux-dev', name: 'Flux Dev', priceUsd: 0.04 }]);
    expect(server.requests[0]?.url).toBe('/api/public/v1/models');
  });
});
