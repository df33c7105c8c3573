/**
 * A/B of benchmark 1's rows in flight: its first case (2,000 rows, uniform 1-3 s, the poll plan learning) once per
 * window given, back to back, in one table. Rows in flight must outnumber what the rate needs over a row's life
 * (requests/s x seconds a row lives / requests a row takes), or the window, not the key's rate, sets the pace.
 *
 *   npx tsx bench/window.ts               # 60 and 120 rows in flight
 *   npx tsx bench/window.ts 60 90 120     # any windows
 *   npx tsx bench/window.ts --quick 60    # 200 rows a run: proves the script works, not the figures
 *   npx tsx bench/window.ts --defaults    # benchmark 1's default-settings cases (the adaptive window, #32), and the
 *                                         # rate-bound one with --concurrency 8: the window of every run before #32
 */
import { ensureDistIsFresh } from '../test/helpers/dist';
import { toMarkdown } from './lib/table';
import { SERVICE_CASES, UTILISATION_HEADERS, caseRow, runCase, type CaseRun } from './utilisation';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const defaults = args.includes('--defaults');
  const windows = args.filter((a) => !a.startsWith('--')).map(Number);
  const bad = windows.find((w) => !Number.isInteger(w) || w < 1);
  if (bad !== undefined) throw new Error(`a window is a whole number of rows in flight, not ${bad}`);
  const base = SERVICE_CASES[0];
  if (!base) throw new Error('benchmark 1 has no case');
  const log = (line: string) => process.stderr.write(`[window ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  await ensureDistIsFresh();
  const ctx = { quick, log, earlier: new Map<string, unknown>(), artifact: (s: string) => s };
  const runs: CaseRun[] = [];
  if (defaults) {
    const cases = SERVICE_CASES.filter((c) => c.defaults);
    for (const service of cases) runs.push(await runCase(ctx, service, quick));
    const rate = cases.find((c) => c.binds !== 'concurrency');
    if (rate) runs.push(await runCase(ctx, { ...rate, name: `${rate.name}, --concurrency 8`, concurrency: 8 }, quick));
  }
  for (const concurrency of windows.length || defaults ? windows : [60, 120]) {
    runs.push(await runCase(ctx, { ...base, name: `${base.name}, ${concurrency} rows in flight`, concurrency }, quick));
  }
  process.stdout.write(
    `${toMarkdown({
      title: `Rows in flight, A/B (benchmark 1's cases${quick ? ', --quick' : ''})`,
      headers: [...UTILISATION_HEADERS],
      rows: runs.map(caseRow),
      notes: [],
    })}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
