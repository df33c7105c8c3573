import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/api/contract';
import { LAGGING_READS_PROFILE, type Simulator } from '../../src/simulator';
import { readLagOf } from '../../src/simulator/read-lag';
import { call, expectError, PROMPT, startTestSim, submit } from './helpers';

/**
 * Reads that lag writes (`readLagMs`): a creation just accepted is not found (404 ERR_NOT_FOUND) until its lag, drawn
 * once per creation, has passed; then it is found as usual. A replay of its key returns it meanwhile.
 */
let sim: Simulator;
afterEach(async () => {
  expect(sim.unexpectedErrors()).toEqual([]);
  await sim.close();
});

describe('reads that lag writes', () => {
  it('a GET of a creation younger than its lag answers 404 ERR_NOT_FOUND; then the creation is found', async () => {
    const started = await startTestSim({ readLagMs: { minMs: 1_500, maxMs: 1_500 } });
    sim = started.sim;
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'k-lag' });
    expect(accepted.status).toBe(202);
    const id = accepted.body.id;
    expectError(await call(sim, 'GET', `/creations/${id}`), 404, ErrorCode.NotFound);
    started.clock.advance(1_499);
    expectError(await call(sim, 'GET', `/creations/${id}`), 404, ErrorCode.NotFound);
    // The same key meanwhile: the service's own record of the key returns the creation.
    const replay = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'k-lag' });
    expect(replay.body.id).toBe(id);
    started.clock.advance(1);
    const found = await call(sim, 'GET', `/creations/${id}`);
    expect(found.status).toBe(200);
    expect(found.body.id).toBe(id);
  });

  it("each creation's lag is drawn in the range, the same on every poll; without the option, none", async () => {
    const config = { seed: 7, ...LAGGING_READS_PROFILE };
    const lags = Array.from({ length: 50 }, (_, i) => readLagOf({ id: `cr_${i}` }, config));
    expect(Math.min(...lags)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...lags)).toBeLessThanOrEqual(3_000);
    expect(new Set(lags).size).toBeGreaterThan(10);
    expect(readLagOf({ id: 'cr_3' }, config)).toBe(lags[3]);
    expect(readLagOf({ id: 'cr_3' }, { seed: 7 })).toBe(0);
    ({ sim } = await startTestSim());
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'k-now' });
    expect((await call(sim, 'GET', `/creations/${accepted.body.id}`)).status).toBe(200);
  });
});
