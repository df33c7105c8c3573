import { afterEach, describe, expect, it } from 'vitest';
import {
  DEMO_API_KEY,
  ManualClock,
  resolveConfig,
  startSimulator,
  type Simulator,
  type SimulatorConfigInput,
} from '../../src/simulator';
import { drawGeneration, timingOf } from '../../src/simulator/generation';
import { hash32, mulberry32, uniformInt } from '../../src/simulator/random';
import { expectChargesConsistent, PROMPT, submit } from './helpers';

const SEED = 7;
const LONG_TAIL = {
  shape: 'lognormal',
  runningMs: { minMs: 500, maxMs: 20_000 },
  medianMs: 1500,
  sigma: 0.75,
} as const satisfies SimulatorConfigInput['generation'];

/** Running times of `n` creations' own streams (as the engine seeds them) under a generation config. */
function runningTimes(generation: SimulatorConfigInput['generation'], n: number, model = 'sdxl'): number[] {
  const timing = timingOf(resolveConfig({ generation }).generation, model);
  return Array.from(
    { length: n },
    (_, i) => drawGeneration(timing, mulberry32(hash32(`cr_${i}`, SEED))).runningMs,
  ).sort((a, b) => a - b);
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

describe('generation-time draws', () => {
  it('keeps log-normal draws within the clip, with their median near medianMs', () => {
    const times = runningTimes(LONG_TAIL, 4000);
    expect(times[0]).toBeGreaterThanOrEqual(500);
    expect(times.at(-1)).toBeLessThanOrEqual(20_000);
    expect(times.every((t) => Number.isInteger(t))).toBe(true);
    expect(quantile(times, 0.5)).toBeGreaterThan(1500 * 0.95);
    expect(quantile(times, 0.5)).toBeLessThan(1500 * 1.05);
    // sigma 0.75: 1.645 sigma above the median is 3.4x the median, well inside the clip.
    expect(quantile(times, 0.95) / quantile(times, 0.5)).toBeGreaterThan(2.8);
  });

  it('has a long tail: p95 / p50 well above the uniform shape over the same range', () => {
    const lognormal = runningTimes(LONG_TAIL, 4000);
    const uniform = runningTimes({ runningMs: LONG_TAIL.runningMs }, 4000);
    const tail = (t: readonly number[]) => quantile(t, 0.95) / quantile(t, 0.5);
    expect(tail(uniform)).toBeLessThan(2);
    expect(tail(lognormal)).toBeGreaterThan(1.5 * tail(uniform));
  });

  it('defaults the median to the geometric middle of the range and clips a wide sigma', () => {
    const timing = timingOf(resolveConfig({ generation: { shape: 'lognormal' } }).generation, 'sdxl');
    expect(timing.medianMs).toBe(2000); // sqrt(1000 * 4000)
    expect(timing.sigma).toBe(0.75);
    const wide = runningTimes({ ...LONG_TAIL, sigma: 5 }, 2000);
    expect(wide[0]).toBe(500);
    expect(wide.at(-1)).toBe(20_000);
  });

  it('reproduces the uniform draws of before with the defaults', () => {
    const timing = timingOf(resolveConfig().generation, 'flux-dev');
    expect(timing.shape).toBe('uniform');
    for (let i = 0; i < 200; i++) {
      const own = mulberry32(hash32(`cr_${i}`, SEED));
      const before = mulberry32(hash32(`cr_${i}`, SEED));
      expect(drawGeneration(timing, own)).toEqual({
        queuedMs: uniformInt(before, 200, 800),
        runningMs: uniformInt(before, 1000, 4000),
      });
      expect(own()).toBe(before()); // the stream stands where it stood: the seed and safety draws are unchanged
    }
  });
});

describe('generation times in the simulator', () => {
  let sim: Simulator | undefined;
  afterEach(async () => {
    if (sim) {
      expectChargesConsistent(sim);
      await sim.close();
    }
    sim = undefined;
  });

  async function start(generation: SimulatorConfigInput['generation']): Promise<ManualClock> {
    const clock = new ManualClock();
    sim = await startSimulator({
      seed: SEED,
      sweepIntervalMs: 0,
      accounts: [{ id: 'a', walletUsd: 1000, keys: [{ id: 'k', key: DEMO_API_KEY }] }],
      limits: { requestsPerSecond: 1e6, burst: 1_000_000, accountConcurrency: null },
      ...(generation ? { generation } : {}),
      clock,
    });
    return clock;
  }

  /** Submits one creation per model and returns each one's id and total generation time (acceptance to end). */
  async function generate(clock: ManualClock, models: readonly string[]): Promise<{ id: string; ms: number }[]> {
    const ids: string[] = [];
    for (const [i, model] of models.entries()) {
      const accepted = await submit(sim!, { prompt: `${PROMPT}, number ${i}`, model });
      expect(accepted.status).toBe(202);
      ids.push(accepted.body.id);
    }
    clock.advance(60_000);
    return ids.map((id) => {
      const record = sim!.creation(id) as { created_at: string; updated_at: string; status: string };
      expect(record.status).toMatch(/succeeded|failed/);
      return { id, ms: Date.parse(record.updated_at) - Date.parse(record.created_at) };
    });
  }

  it('with the default config, gives each creation the uniform times of its own stream', async () => {
    const clock = await start(undefined);
    for (const { id, ms } of await generate(clock, Array<string>(50).fill('sdxl'))) {
      const before = mulberry32(hash32(id, SEED));
      expect(ms).toBe(uniformInt(before, 200, 800) + uniformInt(before, 1000, 4000));
    }
  });

  it('applies a model’s own timing to that model only', async () => {
    const clock = await start({
      queuedMs: { minMs: 100, maxMs: 100 },
      runningMs: { minMs: 1000, maxMs: 1000 },
      models: {
        'flux-schnell': { runningMs: { minMs: 300, maxMs: 300 } },
        'flux-dev': { ...LONG_TAIL, queuedMs: { minMs: 0, maxMs: 0 } },
      },
    });
    const models = Array.from({ length: 60 }, (_, i) => ['sdxl', 'flux-schnell', 'flux-dev'][i % 3] ?? 'sdxl');
    const times = await generate(clock, models);
    const of = (model: string) => times.filter((_, i) => models[i] === model).map((t) => t.ms);
    expect(new Set(of('sdxl'))).toEqual(new Set([1100]));
    expect(new Set(of('flux-schnell'))).toEqual(new Set([400]));
    const dev = of('flux-dev');
    expect(Math.min(...dev)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...dev)).toBeLessThanOrEqual(20_000);
    expect(new Set(dev).size).toBeGreaterThan(10);
  });

  it('names the path of a wrong generation setting', () => {
    expect(() => resolveConfig({ generation: { models: { nope: { sigma: 1 } } } })).toThrow(
      /generation\.models\.nope: unknown model "nope"/,
    );
    expect(() => resolveConfig({ generation: { shape: 'pareto' as 'uniform' } })).toThrow(/generation\.shape/);
    expect(() => resolveConfig({ generation: { shape: 'lognormal', sigma: -1 } })).toThrow(/generation\.sigma/);
    expect(() => resolveConfig({ generation: { medianMs: 50 } })).toThrow(
      /generation\.medianMs: must lie within runningMs/,
    );
    expect(() =>
      resolveConfig({ generation: { models: { sdxl: { runningMs: { minMs: 10, maxMs: 20 }, medianMs: 30 } } } }),
    ).toThrow(/generation\.models\.sdxl\.medianMs: must lie within runningMs/);
    expect(() => resolveConfig({ generation: { models: { sdxl: { runningMs: { minMs: 10 } } } } } as never)).toThrow(
      /generation\.models\.sdxl\.runningMs\.maxMs/,
    );
  });
});
