import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import { FaultKind, ManualClock, resolveConfig, SimulatorConfigError, type Simulator } from '../../src/simulator';
import { call, expectError, expectChargesConsistent, netCharged, PROMPT, startTestSim, submit } from './helpers';

/**
 * The `pricing` switches: how a price is shown (contract-defaults.md's `cost_usd` / `price_usd`, other names, or none) and
 * whether a creation's cost is on its 202 at all. Only the HTTP bodies change; charging and the charge book do not.
 */

const running: Simulator[] = [];
afterEach(async () => {
  for (const sim of running.splice(0)) {
    expectChargesConsistent(sim);
    await sim.close();
  }
});

type Pricing = { fields?: 'default' | 'renamed' | 'hidden'; costOn?: 'always' | 'poll-only' };

async function start(pricing: Pricing, clock = new ManualClock(), stateFile?: string) {
  const { sim } = await startTestSim({ pricing, ...(stateFile ? { stateFile } : {}) }, clock);
  running.push(sim);
  return { sim, clock };
}

/** The fields of a creation record other than its price (and `error`, on failed ones). */
const RECORD = [
  'id',
  'status',
  'model',
  'prompt',
  'width',
  'height',
  'num_images',
  'seed',
  'created_at',
  'updated_at',
  'images',
];
const keysOf = (body: unknown) => Object.keys(body as object).sort();
const expected = (...extra: string[]) => [...RECORD, ...extra].sort();
const PRICE_NAMES = /"(cost_usd|price_usd|charge|pricing|usd_per_image|amount|currency)"/;

const COST = {
  default: { cost_usd: 0.12 },
  renamed: { charge: { amount: '0.120000', currency: 'USD' } },
  hidden: {},
} as const;
const MODEL = {
  default: { id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 },
  renamed: { id: 'flux-dev', name: 'Flux Dev', pricing: { usd_per_image: 0.04 } },
  hidden: { id: 'flux-dev', name: 'Flux Dev' },
} as const;

describe('pricing.fields: how prices appear', () => {
  it.each(['default', 'renamed', 'hidden'] as const)(
    '%s: the 202, the GET and GET /models carry exactly these price fields',
    async (fields) => {
      const { sim, clock } = await start({ fields });
      const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev', num_images: 3 });
      expect(accepted.status).toBe(202);
      const priceKeys = Object.keys(COST[fields]);
      expect(keysOf(accepted.body)).toEqual(expected(...priceKeys));
      expect(accepted.body).toMatchObject(COST[fields]);

      const polled = await call(sim, 'GET', `/creations/${accepted.body.id}`);
      expect(polled.status).toBe(200);
      expect(keysOf(polled.body)).toEqual(expected(...priceKeys));
      expect(polled.body).toMatchObject(COST[fields]);
      clock.advance(10_000);
      const done = await call(sim, 'GET', `/creations/${accepted.body.id}`);
      expect(done.body.status).toBe('succeeded');
      expect(keysOf(done.body)).toEqual(expected(...priceKeys));
      expect(sim.creation(accepted.body.id)).toEqual(done.body);

      const models = await call(sim, 'GET', '/models');
      expect(models.status).toBe(200);
      expect(models.body.data).toHaveLength(3);
      expect(models.body.data[0]).toEqual(MODEL[fields]);
      for (const model of models.body.data) {
        expect(keysOf(model)).toEqual(Object.keys(MODEL[fields]).sort());
      }
      if (fields !== 'default') {
        for (const body of [accepted.body, polled.body, done.body, models.body]) {
          expect(JSON.stringify(body)).not.toMatch(/cost_usd|price_usd/);
        }
      }
      if (fields === 'hidden') {
        for (const body of [accepted.body, polled.body, done.body, models.body]) {
          expect(JSON.stringify(body)).not.toMatch(PRICE_NAMES);
        }
      }
      // charging is the same in every mode
      expect(netCharged(sim)).toBeCloseTo(0.12, 10);
      expect(sim.walletUsd('acct_demo')).toBeCloseTo(100 - 0.12, 10);
    },
  );

  it('renamed: the amount is the full cost as a string with six decimals, per model price', async () => {
    const { sim } = await start({ fields: 'renamed' });
    const one = await submit(sim, { prompt: PROMPT, model: 'flux-schnell' });
    expect(one.body).toMatchObject({ charge: { amount: '0.010000', currency: 'USD' } });
    const four = await submit(sim, { prompt: PROMPT, model: 'sdxl', num_images: 4 });
    expect(four.body).toMatchObject({ charge: { amount: '0.080000', currency: 'USD' } });
    const models = await call(sim, 'GET', '/models');
    expect(models.body.data).toEqual([
      { id: 'flux-dev', name: 'Flux Dev', pricing: { usd_per_image: 0.04 } },
      { id: 'flux-schnell', name: 'Flux Schnell', pricing: { usd_per_image: 0.01 } },
      { id: 'sdxl', name: 'Stable Diffusion XL', pricing: { usd_per_image: 0.02 } },
    ]);
  });

  it('hidden: the charge book still records the charge and the refund; 402 details still name the amounts', async () => {
    const { sim, clock } = await start({ fields: 'hidden' });
    sim.scriptFor('[bad]', [FaultKind.FailGeneration]);
    const ok = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'row-1' });
    const bad = await submit(sim, { prompt: `${PROMPT} [bad]`, model: 'flux-dev', num_images: 2 });
    expect([ok.status, bad.status]).toEqual([202, 202]);
    expect(sim.charges.entries()).toEqual([
      expect.objectContaining({ kind: 'charge', creationId: ok.body.id, idempotencyKey: 'row-1', amountUsd: 0.04 }),
      expect.objectContaining({ kind: 'charge', creationId: bad.body.id, amountUsd: 0.08 }),
    ]);
    clock.advance(10_000);
    const failed = await call(sim, 'GET', `/creations/${bad.body.id}`);
    expect(failed.body).toMatchObject({ status: 'failed', error: FailureMessage.Failed });
    expect(keysOf(failed.body)).toEqual(expected('error'));
    expect(sim.charges.entries().map((e) => [e.kind, e.amountUsd])).toEqual([
      ['charge', 0.04],
      ['charge', 0.08],
      ['refund', 0.08],
    ]);
    expect(netCharged(sim)).toBeCloseTo(0.04, 10);

    sim.setWallet('acct_demo', 0.01);
    const refused = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expectError(refused, 402, ErrorCode.InsufficientBalance);
    expect(refused.body.error.details).toMatchObject({ required: 0.04, balance: 0.01 });
  });
});

describe('pricing.costOn: poll-only', () => {
  it.each(['default', 'renamed'] as const)(
    '%s fields: no cost on the 202 nor on its replay, the cost on every GET',
    async (fields) => {
      const { sim, clock } = await start({ fields, costOn: 'poll-only' });
      const req = { prompt: PROMPT, model: 'flux-dev', num_images: 3 };
      const first = await submit(sim, req, { idempotencyKey: 'row-1' });
      const replay = await submit(sim, req, { idempotencyKey: 'row-1' });
      expect([first.status, replay.status]).toEqual([202, 202]);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
      for (const body of [first.body, replay.body]) {
        expect(keysOf(body)).toEqual(expected());
        expect(JSON.stringify(body)).not.toMatch(PRICE_NAMES);
      }
      const polled = await call(sim, 'GET', `/creations/${first.body.id}`);
      expect(keysOf(polled.body)).toEqual(expected(...Object.keys(COST[fields])));
      expect(polled.body).toMatchObject(COST[fields]);
      clock.advance(10_000);
      const done = await call(sim, 'GET', `/creations/${first.body.id}`);
      expect(done.body).toMatchObject({ status: 'succeeded', ...COST[fields] });
      expect(sim.charges.entries().filter((e) => e.kind === 'charge')).toHaveLength(1);
    },
  );

  it('a failed creation shows its cost on GET, not on its 202', async () => {
    const { sim, clock } = await start({ costOn: 'poll-only' });
    sim.scriptFor('[bad]', [FaultKind.FailSafety]);
    const accepted = await submit(sim, { prompt: `${PROMPT} [bad]`, model: 'flux-dev' }, { idempotencyKey: 'k' });
    expect(accepted.status).toBe(202);
    expect(keysOf(accepted.body)).toEqual(expected());
    clock.advance(10_000);
    const failed = await call(sim, 'GET', `/creations/${accepted.body.id}`);
    expect(failed.body).toMatchObject({ status: 'failed', error: FailureMessage.SafetyFilter, cost_usd: 0.04 });
    expect(keysOf(failed.body)).toEqual(expected('cost_usd', 'error'));
    const replay = await submit(sim, { prompt: `${PROMPT} [bad]`, model: 'flux-dev' }, { idempotencyKey: 'k' });
    expect(replay.status).toBe(202);
    expect(keysOf(replay.body)).toEqual(expected());
    expect(netCharged(sim)).toBe(0);
  });

  it('a 202 stored behind a 500 (internal_after_charge) replays without its cost', async () => {
    const { sim } = await start({ fields: 'renamed', costOn: 'poll-only' });
    sim.scriptFor('[ambiguous]', [FaultKind.InternalAfterCharge]);
    const req = { prompt: `${PROMPT} [ambiguous]`, model: 'flux-dev' };
    expectError(await submit(sim, req, { idempotencyKey: 'k' }), 500, ErrorCode.Internal);
    const replay = await submit(sim, req, { idempotencyKey: 'k' });
    expect(replay.status).toBe(202);
    expect(keysOf(replay.body)).toEqual(expected());
    const polled = await call(sim, 'GET', `/creations/${replay.body.id}`);
    expect(polled.body).toMatchObject({ charge: { amount: '0.040000', currency: 'USD' } });
  });
});

describe('pricing and the state file', () => {
  it('a 202 saved under one setting replays as the current setting shows it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-sim-pricing-'));
    try {
      const file = path.join(dir, 'state.json');
      const req = { prompt: PROMPT, model: 'flux-dev' };
      const first = await start({}, new ManualClock(), file);
      const accepted = await submit(first.sim, req, { idempotencyKey: 'k' });
      expect(accepted.body).toMatchObject({ cost_usd: 0.04 });
      running.splice(running.indexOf(first.sim), 1);
      expectChargesConsistent(first.sim);
      await first.sim.close();

      const second = await start({ fields: 'renamed', costOn: 'poll-only' }, new ManualClock(), file);
      const replay = await submit(second.sim, req, { idempotencyKey: 'k' });
      expect(replay.status).toBe(202);
      expect(replay.body.id).toBe(accepted.body.id);
      expect(keysOf(replay.body)).toEqual(expected());
      expect((await call(second.sim, 'GET', `/creations/${accepted.body.id}`)).body).toMatchObject({
        charge: { amount: '0.040000', currency: 'USD' },
      });
    } finally {
      for (const sim of running.splice(0)) await sim.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('pricing config', () => {
  it('defaults to the contract-defaults.md fields, shown always', () => {
    expect(resolveConfig().pricing).toEqual({ fields: 'default', costOn: 'always' });
  });

  it('names a wrong value', () => {
    expect(() => resolveConfig({ pricing: { fields: 'nested' as 'renamed' } })).toThrow(SimulatorConfigError);
    expect(() => resolveConfig({ pricing: { costOn: 'never' as 'always' } })).toThrow(/pricing\.costOn/);
  });
});
