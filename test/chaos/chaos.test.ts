import { describe, expect, it } from 'vitest';
import { SIMULATOR_FAULT_KINDS } from './chaos-plan';
import { runChaos } from './chaos-scenario';
import { formatFigures } from './figures';

/**
 * The short form of the chaos run, for CI: 100 rows through every simulator and proxy fault and 429 storms, two
 * worker SIGKILLs and a dev-server restart, then every invariant (`npm run chaos` is the full form).
 *
 * 100 rows are enough: each simulator fault kind is scripted on a row of its own (rows 4 to 67), the proxy's faults
 * and the storms come by probability over about 250 exchanges and a minute of batch, and the checks below fail a run
 * that met any kind zero times. The invariants hold row by row, so more rows of the same mix prove nothing more.
 * 32 rows in flight, as in the full form: the kills and the restart meet a third of the batch at the service.
 */
const ROWS = 100;
const SEED = Number(process.env.CHAOS_SEED ?? 20261);

describe('chaos, short form', () => {
  it(
    'keeps every invariant through faults, kills and a server restart',
    async () => {
      const t0 = Date.now();
      const report = await runChaos({
        rows: ROWS,
        kills: 2,
        serverRestarts: 1,
        seed: SEED,
        concurrency: 32,
        budgetMs: 6 * 60_000,
      });
      console.log(formatFigures(report, Date.now() - t0));
      const f = report.figures;

      expect(report.violations).toEqual([]);
      // The chaos happened: the invariants above were tested under it, not in a quiet run.
      expect(f.kills).toBeGreaterThanOrEqual(2);
      expect(f.serverRestarts).toBeGreaterThanOrEqual(1);
      for (const kind of SIMULATOR_FAULT_KINDS) expect(f.simulatorFaults[kind], kind).toBeGreaterThan(0);
      for (const n of Object.values(f.proxyFaults)) expect(n).toBeGreaterThan(0);
      expect(f.tooManyRequests).toBeGreaterThan(0);
      // The sources of truth agree: every row in one final state, every success paid once with its image.
      expect(Object.values(f.byState).reduce((a, b) => a + b, 0)).toBe(ROWS);
      expect(f.byState.succeeded ?? 0).toBeGreaterThan(ROWS * 0.8);
      expect(f.imagesChecked).toBeGreaterThanOrEqual(f.byState.succeeded ?? 0);
      expect(f.resultFileRows).toBe(ROWS);
    },
    9 * 60_000,
  );
});
