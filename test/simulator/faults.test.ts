import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import { FaultKind, type Simulator } from '../../src/simulator';
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

const failures = [
  [FaultKind.FailSafety, FailureMessage.SafetyFilter],
  [FaultKind.FailNoImage, FailureMessage.NoImage],
  [FaultKind.FailTimedOut, FailureMessage.TimedOut],
  [FaultKind.FailGeneration, FailureMessage.Failed],
] as const;

describe('faults at generation time', () => {
  it.each(failures)('%s: accepted, then failed with the exact string and refunded in full', async (kind, message) => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    sim.scriptFor('[bad]', [kind]);
    const accepted = await submit(sim, { prompt: `${PROMPT} [bad]`, model: 'flux-dev', num_images: 2 });
    expect(accepted.status).toBe(202);
    expect(netCharged(sim)).toBeCloseTo(0.08, 10);
    clock.advance(10_000);
    const polled = await call(sim, 'GET', `/creations/${accepted.body.id}`);
    expect(polled.body.status).toBe('failed');
    expect(polled.body.error).toBe(message);
    expect(netCharged(sim)).toBe(0);
    expect(sim.charges.entries().map((e) => [e.kind, e.amountUsd])).toEqual([
      ['charge', 0.08],
      ['refund', 0.08],
    ]);
  });

  it('a script consumes one fault per submission: fail the first with "Generation failed.", then succeed', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    sim.scriptFor('[flaky]', ['fail_generation', 'none']);
    const req = { prompt: `${PROMPT} [flaky]`, model: 'flux-dev' };
    const a = await submit(sim, req);
    const b = await submit(sim, req);
    const c = await submit(sim, req);
    clock.advance(10_000);
    const status = async (id: string) => (await call(sim, 'GET', `/creations/${id}`)).body;
    expect(await status(a.body.id)).toMatchObject({ status: 'failed', error: FailureMessage.Failed });
    expect(await status(b.body.id)).toMatchObject({ status: 'succeeded' });
    expect(await status(c.body.id)).toMatchObject({ status: 'succeeded' });
    expect(netCharged(sim)).toBeCloseTo(0.08, 10);
  });

  it('safety filter: trigger words always, generic one- or two-word prompts by probability, at generation time', async () => {
    const { sim: s, clock } = await startTestSim({
      safety: { triggerWords: ['Dragon'], genericDeclineProbability: 1 },
    });
    sim = s;
    const ids = await Promise.all(
      ['a red dragon over a medieval town', 'sunset', 'blue cat', 'three word prompt'].map(
        async (prompt) => (await submit(sim, { prompt, model: 'flux-dev' })).body.id,
      ),
    );
    expect((await call(sim, 'GET', `/creations/${ids[0]}`)).body.status).toBe('queued');
    clock.advance(10_000);
    const results = [];
    for (const id of ids) results.push((await call(sim, 'GET', `/creations/${id}`)).body);
    expect(results.map((r) => r.error ?? r.status)).toEqual([
      FailureMessage.SafetyFilter,
      FailureMessage.SafetyFilter,
      FailureMessage.SafetyFilter,
      'succeeded',
    ]);
    expect(FailureMessage.SafetyFilter).toContain('\u2014');
  });

  it('generic prompts are never declined with probability 0', async () => {
    const { sim: s, clock } = await startTestSim({ safety: { genericDeclineProbability: 0 } });
    sim = s;
    const { body } = await submit(sim, { prompt: 'sunset', model: 'flux-dev' });
    clock.advance(10_000);
    expect((await call(sim, 'GET', `/creations/${body.id}`)).body.status).toBe('succeeded');
  });
});

describe('faults at submission', () => {
  it('502 ERR_GENERATION_FAILED: charged, then refunded before the response', async () => {
    ({ sim } = await startTestSim());
    sim.scriptFor('[502]', ['generation_failed_502']);
    const reply = await submit(sim, { prompt: `${PROMPT} [502]`, model: 'flux-dev' });
    expectError(reply, 502, ErrorCode.GenerationFailed);
    expect(sim.charges.entries().map((e) => e.kind)).toEqual(['charge', 'refund']);
    expect(sim.charges.byCreation()[0]?.outcome).toBe('rejected');
    expect(sim.walletUsd('acct_demo')).toBe(100);
  });

  it('503 ERR_PROVIDER_UNAVAILABLE: Retry-After, refunded, no creation started', async () => {
    ({ sim } = await startTestSim({ faults: { providerRetryAfterSeconds: 7 } }));
    sim.scriptFor('[503]', ['provider_unavailable_503']);
    const reply = await submit(sim, { prompt: `${PROMPT} [503]`, model: 'flux-dev' });
    expectError(reply, 503, ErrorCode.ProviderUnavailable);
    expect(expectRetryAfter(reply)).toBe(7);
    expect(sim.stats()).toMatchObject({ creations: 0, inFlight: 0 });
    expect(netCharged(sim)).toBe(0);
  });

  it('faults by probability come from the seeded PRNG: the same seed gives the same run', async () => {
    const run = async () => {
      const { sim: s, clock } = await startTestSim({
        seed: 1234,
        faults: { probabilities: { generation_failed_502: 0.3, fail_no_image: 0.3 } },
      });
      try {
        const out: string[] = [];
        for (let i = 0; i < 20; i++) {
          const r = await submit(s, { prompt: `${PROMPT} ${i}`, model: 'flux-dev' });
          out.push(r.status === 202 ? r.body.id : String(r.status));
        }
        clock.advance(10_000);
        for (const id of out.filter((x) => x.startsWith('cr_'))) {
          const polled = (await call(s, 'GET', `/creations/${id}`)).body;
          out.push(polled.error ?? polled.status);
        }
        expectChargesConsistent(s);
        return out;
      } finally {
        await s.close();
      }
    };
    const first = await run();
    expect(await run()).toEqual(first);
    expect(first).toContain('502');
    expect(first).toContain(FailureMessage.NoImage);
    expect(first).toContain('succeeded');
    ({ sim } = await startTestSim());
  });

  it('slow responses arrive late but intact; setFaults at run time turns faults on and off', async () => {
    ({ sim } = await startTestSim());
    sim.setFaults({ slow: { probability: 1, delayMs: 120 } });
    const started = Date.now();
    const slow = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expect(slow.status).toBe(202);
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    sim.setFaults({ probabilities: { internal_before_charge: 1 } });
    expectError(await submit(sim, { prompt: PROMPT, model: 'flux-dev' }), 500, ErrorCode.Internal);
    sim.setFaults({});
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
  });
});

describe('simulator-only HTTP endpoints', () => {
  it('POST /_sim/control changes behaviour; GET /_sim/ledger shows entries, summaries and violations', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    const control = `http://127.0.0.1:${sim.port}/_sim/control`;
    const scripted = await call(sim, 'POST', control, {
      key: null,
      json: { op: 'script', match: '[x]', faults: ['fail_timed_out'] },
    });
    expect(scripted).toMatchObject({ status: 200, body: { ok: true } });
    const { body } = await submit(sim, { prompt: `${PROMPT} [x]`, model: 'flux-dev' }, { idempotencyKey: 'idem-1' });
    clock.advance(10_000);
    const res = await request(`http://127.0.0.1:${sim.port}/_sim/ledger`);
    const ledger = (await res.body.json()) as Record<string, unknown>;
    expect(ledger).toMatchObject({
      entries: [
        { kind: 'charge', keyId: 'key_demo', creationId: body.id, idempotencyKey: 'idem-1', amountUsd: 0.04 },
        { kind: 'refund', keyId: 'key_demo', creationId: body.id, idempotencyKey: 'idem-1', amountUsd: 0.04 },
      ],
      byKey: [{ keyId: 'key_demo', charges: 1, refunds: 1, netUsd: 0 }],
      byCreation: [{ creationId: body.id, outcome: 'failed', netUsd: 0 }],
      byIdempotencyKey: [{ idempotencyKey: 'idem-1', netCharged: 0 }],
      violations: { chargedTwice: [], unrefundedFailures: [], chargesWithoutCreation: [] },
    });
    expect(JSON.stringify(ledger)).not.toContain('img_live_');
  });

  it('a wrong control command is a 400 naming the field, and changes nothing', async () => {
    ({ sim } = await startTestSim());
    const control = `http://127.0.0.1:${sim.port}/_sim/control`;
    const bad = await call(sim, 'POST', control, {
      key: null,
      json: { op: 'setWallet', accountId: 'acct_demo', usd: -1 },
    });
    expectError(bad, 400, ErrorCode.InvalidRequest);
    expect(bad.body.error.message).toContain('usd');
    const unknown = await call(sim, 'POST', control, { key: null, json: { op: 'revokeKey', keyId: 'nope' } });
    expectError(unknown, 400, ErrorCode.InvalidRequest);
    expect(sim.walletUsd('acct_demo')).toBe(100);
  });
});
