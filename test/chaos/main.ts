import { Command, InvalidArgumentError } from 'commander';
import { ChaosBudgetError, runChaos } from './chaos-scenario';
import { formatFigures } from './figures';

/**
 * `npm run chaos`: the full chaos run (1,000 rows, 5 worker SIGKILLs, a dev-server restart, every fault) with
 * a hard time budget. Prints the figures table; the exit status is 0 only when every invariant holds.
 */
const int = (name: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be a whole number >= ${min}`);
  return n;
};

const program = new Command('chaos')
  .description('the chaos run: a batch on the dev server through faults, kills and restarts, then its invariants')
  .option('--rows <n>', 'rows of the batch', int('--rows', 20), 1000)
  .option('--kills <n>', 'worker SIGKILLs', int('--kills', 0), 5)
  .option('--restarts <n>', 'dev-server stops and restarts', int('--restarts', 0), 1)
  .option('--seed <n>', 'seed of everything random (default: from the clock, printed)', int('--seed', 0))
  .option('--concurrency <n>', 'rows in flight at most', int('--concurrency', 1), 32)
  .option('--budget-min <n>', 'minutes the batch may take before the run fails', int('--budget-min', 1), 25)
  .option('--keep', "keep the run's folder even when it passes", false);

async function main(): Promise<number> {
  program.parse();
  const o = program.opts<{
    rows: number;
    kills: number;
    restarts: number;
    seed?: number;
    concurrency: number;
    budgetMin: number;
    keep: boolean;
  }>();
  const seed = o.seed ?? Date.now() % 1_000_000;
  const t0 = Date.now();
  const budgetMs = o.budgetMin * 60_000;
  // Set-up and checks come on top of the batch's budget; past this the process ends whatever it is doing.
  const watchdog = setTimeout(
    () => {
      console.error(`[chaos] still running ${o.budgetMin + 5} minutes after the start: giving up`);
      process.exit(1);
    },
    budgetMs + 5 * 60_000,
  );
  watchdog.unref();
  try {
    const report = await runChaos({
      rows: o.rows,
      kills: o.kills,
      serverRestarts: o.restarts,
      seed,
      concurrency: o.concurrency,
      budgetMs,
      keepDir: o.keep,
    });
    console.log(`\n${formatFigures(report, Date.now() - t0)}`);
    if (report.violations.length > 0) {
      console.log(`\nviolated invariants:\n  ${report.violations.join('\n  ')}`);
      return 1;
    }
    return 0;
  } catch (err) {
    console.error(
      `[chaos] ${err instanceof ChaosBudgetError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    return 1;
  }
}

void main().then((code) => {
  process.exitCode = code;
});
