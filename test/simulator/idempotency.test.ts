import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/api/contract';
import { type Simulator } from '../../src/simulator';
import {
  call,
  expectError,
  expectChargesConsistent,
  expectRetryAfter,
  netCharged,
  PROMPT,
  startTestSim,
  submit,
} from './helpers';

let sim: Simulator;
afterEach(async () => {
  expectChargesConsistent(sim);
  await sim.close();
});

const body = { prompt: PROMPT, model: 'flux-dev' };

describe('Idempotency-Key: both variants', () => {
  it.each(['accepted-only', 'all-judged'] as const)(
    '%s: same key and body replays the 202, charged once',
    async (variant) => {
      ({ sim } = await startTestSim({ idempotency: { variant } }));
      const first = await submit(sim, body, { idempotencyKey: 'batch-1/row-1/attempt-1' });
      const second = await submit(sim, body, { idempotencyKey: 'batch-1/row-1/attempt-1' });
      expect(first.status).toBe(202);
      expect(second.status).toBe(202);
      expect(second.body).toEqual(first.body);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(sim.charges.entries().filter((e) => e.kind === 'charge')).toHaveLength(1);
      expect(sim.charges.byIdempotencyKey()).toEqual([
        expect.objectContaining({
          idempotencyKey: 'batch-1/row-1/attempt-1',
          creationIds: [first.body.id],
          netUsd: 0.04,
        }),
      ]);
    },
  );

  it('the same key with a different body: 400 with details.errors[0].field = Idempotency-Key', async () => {
    ({ sim } = await startTestSim());
    expect((await submit(sim, body, { idempotencyKey: 'k' })).status).toBe(202);
    const other = await submit(sim, { ...body, num_images: 2 }, { idempotencyKey: 'k' });
    expectError(other, 400, ErrorCode.InvalidRequest);
    expect(other.body.error.details.errors[0]?.field).toBe('Idempotency-Key');
    expect(netCharged(sim)).toBeCloseTo(0.04, 10);
  });

  it.each([['x'.repeat(256)], ['caf\u00e9'], ['']])('an invalid key %j: 400 naming Idempotency-Key', async (key) => {
    ({ sim } = await startTestSim());
    const reply = await submit(sim, body, { idempotencyKey: key });
    expectError(reply, 400, ErrorCode.InvalidRequest);
    expect(reply.body.error.details.errors).toEqual([
      { field: 'Idempotency-Key', message: expect.any(String) as unknown },
    ]);
    expect(sim.charges.entries()).toEqual([]);
  });

  it('accepts 255 printable ASCII characters', async () => {
    ({ sim } = await startTestSim());
    const key = Array.from({ length: 255 }, (_, i) => String.fromCharCode(0x21 + (i % 94))).join('');
    expect((await submit(sim, body, { idempotencyKey: key })).status).toBe(202);
  });

  it('keys are remembered for 24 h: after that the key is new', async () => {
    const { sim: s, clock } = await startTestSim({ safety: { triggerWords: ['[unsafe]'] } });
    sim = s;
    const failing = { prompt: `${PROMPT} [unsafe]`, model: 'flux-dev' };
    const first = await submit(sim, failing, { idempotencyKey: 'old' });
    clock.advance(24 * 3600 * 1000 - 1);
    expect((await submit(sim, failing, { idempotencyKey: 'old' })).body.id).toBe(first.body.id);
    clock.advance(1);
    const later = await submit(sim, failing, { idempotencyKey: 'old' });
    expect(later.status).toBe(202);
    expect(later.body.id).not.toBe(first.body.id);
  });

  it('concurrent requests with one key: the second waits for the first and is served its replay', async () => {
    ({ sim } = await startTestSim());
    sim.scriptFor('[slow]', [{ kind: 'slow', delayMs: 150 }]);
    const slowBody = { prompt: `${PROMPT} [slow]`, model: 'flux-dev' };
    const order: string[] = [];
    const [a, b] = await Promise.all([
      submit(sim, slowBody, { idempotencyKey: 'same' }).then((r) => (order.push('first'), r)),
      new Promise((r) => setTimeout(r, 20)).then(() =>
        submit(sim, slowBody, { idempotencyKey: 'same' }).then((r) => (order.push('second'), r)),
      ),
    ]);
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.body.id).toBe(a.body.id);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(order).toEqual(['first', 'second']);
    expect(sim.charges.entries()).toHaveLength(1);
  });

  it('401, 403 and 429 are never stored under the key', async () => {
    const { sim: s, clock } = await startTestSim({
      idempotency: { variant: 'all-judged' },
      limits: { requestsPerSecond: 1, burst: 1 },
    });
    sim = s;
    expect((await call(sim, 'GET', '/models')).status).toBe(200);
    expectError(await submit(sim, body, { idempotencyKey: 'k' }), 429, ErrorCode.RateLimit);
    expect((await submit(sim, body, { idempotencyKey: 'k', key: null })).status).toBe(401);
    clock.advance(1000);
    expect((await submit(sim, body, { idempotencyKey: 'k' })).status).toBe(202);
  });
});

describe('Idempotency-Key: what each variant stores', () => {
  it('503: variant (a) judges the retry afresh, variant (b) replays the stored 503 with Retry-After', async () => {
    for (const variant of ['accepted-only', 'all-judged'] as const) {
      ({ sim } = await startTestSim({ idempotency: { variant } }));
      sim.scriptFor('[outage]', ['provider_unavailable_503']);
      const outage = { prompt: `${PROMPT} [outage]`, model: 'flux-dev' };
      const first = await submit(sim, outage, { idempotencyKey: 'k' });
      expectError(first, 503, ErrorCode.ProviderUnavailable);
      expectRetryAfter(first);
      const retry = await submit(sim, outage, { idempotencyKey: 'k' });
      if (variant === 'accepted-only') {
        expect(retry.status).toBe(202);
        expect(netCharged(sim)).toBeCloseTo(0.04, 10);
      } else {
        expectError(retry, 503, ErrorCode.ProviderUnavailable);
        expectRetryAfter(retry);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(netCharged(sim)).toBe(0);
        expect(sim.charges.entries().map((e) => e.kind)).toEqual(['charge', 'refund']);
      }
      expectChargesConsistent(sim);
      if (variant === 'accepted-only') await sim.close();
    }
  });

  it('400 and 402 are stored only in variant (b)', async () => {
    for (const variant of ['accepted-only', 'all-judged'] as const) {
      const { sim: s } = await startTestSim({ idempotency: { variant } });
      try {
        s.setWallet('acct_demo', 0);
        expect((await submit(s, body, { idempotencyKey: 'wallet' })).status).toBe(402);
        s.setWallet('acct_demo', 10);
        const retry = await submit(s, body, { idempotencyKey: 'wallet' });
        expect(retry.status).toBe(variant === 'accepted-only' ? 202 : 402);
        const bad = { prompt: '', model: 'flux-dev' };
        expect((await submit(s, bad, { idempotencyKey: 'bad' })).status).toBe(400);
        const again = await submit(s, bad, { idempotencyKey: 'bad' });
        expect(again.headers['idempotent-replayed']).toBe(variant === 'all-judged' ? 'true' : undefined);
        expectChargesConsistent(s);
      } finally {
        await s.close();
      }
    }
    ({ sim } = await startTestSim());
  });

  it('500 after the charge: (a) the retry replays the 202 of the creation that exists; (b) replays the 500', async () => {
    for (const variant of ['accepted-only', 'all-judged'] as const) {
      const { sim: s } = await startTestSim({ idempotency: { variant } });
      try {
        s.scriptFor('[ambiguous]', ['internal_after_charge']);
        const req = { prompt: `${PROMPT} [ambiguous]`, model: 'flux-dev' };
        expectError(await submit(s, req, { idempotencyKey: 'k' }), 500, ErrorCode.Internal);
        expect(s.charges.byCreation()).toHaveLength(1);
        const [row] = s.charges.byCreation();
        const retry = await submit(s, req, { idempotencyKey: 'k' });
        if (variant === 'accepted-only') {
          expect(retry.status).toBe(202);
          expect(retry.body.id).toBe(row?.creationId);
          expect((await call(s, 'GET', `/creations/${retry.body.id}`)).status).toBe(200);
        } else {
          expectError(retry, 500, ErrorCode.Internal);
        }
        expect(s.charges.entries()).toHaveLength(1);
        expectChargesConsistent(s);
      } finally {
        await s.close();
      }
    }
    ({ sim } = await startTestSim());
  });

  it('500 before the charge: nothing charged, and in (a) the retry is judged afresh', async () => {
    ({ sim } = await startTestSim());
    sim.scriptFor('[early]', ['internal_before_charge']);
    const req = { prompt: `${PROMPT} [early]`, model: 'flux-dev' };
    expectError(await submit(sim, req, { idempotencyKey: 'k' }), 500, ErrorCode.Internal);
    expect(sim.charges.entries()).toEqual([]);
    expect((await submit(sim, req, { idempotencyKey: 'k' })).status).toBe(202);
    expect(sim.charges.entries()).toHaveLength(1);
  });

  it('connection reset after commit: the client sees no response, the retry replays the accepted creation', async () => {
    ({ sim } = await startTestSim());
    sim.scriptFor('[reset]', ['reset_after_commit']);
    const req = { prompt: `${PROMPT} [reset]`, model: 'flux-dev' };
    const lost = await submit(sim, req, { idempotencyKey: 'k' }).catch((err: Error) => err);
    expect(lost).toBeInstanceOf(Error);
    expect(sim.charges.entries()).toHaveLength(1);
    const retry = await submit(sim, req, { idempotencyKey: 'k' });
    expect(retry.status).toBe(202);
    expect(retry.body.id).toBe(sim.charges.entries()[0]?.creationId);
    expect(sim.charges.entries()).toHaveLength(1);
  });
});
