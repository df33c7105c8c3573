/**
 * 4. Scale: 10,000- and 100,000-row files through validation (the CLI, `imagebatch validate`) and page reading
 * (the built page reader, page by page as the batch workflow reads them), each in its own process for its peak RSS;
 * then a 10,000-row batch end to end with the peak RSS of the worker and of the CLI. Goals: validation of 100,000
 * rows in under 5 s; worker peak RSS under 400 MB during the 10,000-row batch.
 */
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import path from 'node:path';
import { writeBatchFile, writeRichBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { Child, REPO_ROOT, startCli } from './lib/processes';
import { ProcWatch } from './lib/proc';
import { simulatorSettings } from './lib/settings';
import { Proc, Stack } from './lib/stack';
import { num, verdict, type Cell, type Table } from './lib/table';
import { ORCHESTRATION_CONCURRENCY, ZERO_LATENCY_WORKER_ENV } from './orchestration';

export const VALIDATION_GOAL_S = 5;
export const WORKER_RSS_GOAL_MB = 400;

/** Validates a file with the built validator alone (no CLI start-up); prints JSON. */
const VALIDATE_ONLY = `
const { validateBatchFile } = require(${JSON.stringify(path.join(REPO_ROOT, 'dist', 'batch'))});
(async () => {
  const t0 = process.hrtime.bigint();
  const report = await validateBatchFile(process.argv[1]);
  console.log(JSON.stringify({ validRows: report.validRows, seconds: Number(process.hrtime.bigint() - t0) / 1e9 }));
})();
`;

/** Reads a file page by page with the built reader, as the batch workflow's activity does; prints JSON. */
const READ_PAGES = `
const { readBatchPage } = require(${JSON.stringify(path.join(REPO_ROOT, 'dist', 'batch'))});
(async () => {
  const t0 = process.hrtime.bigint();
  let cursor, rows = 0, pages = 0;
  for (;;) {
    const page = await readBatchPage(process.argv[1], cursor, { maxRows: 100 });
    rows += page.rows.length; pages++;
    if (page.done) break;
    cursor = page.nextCursor;
  }
  console.log(JSON.stringify({ rows, pages, seconds: Number(process.hrtime.bigint() - t0) / 1e9 }));
})();
`;

interface Timed {
  what: string;
  rows: number;
  fileMb: number;
  seconds: number;
  peakRssMb: number;
}

/** Runs a child to its end; its wall time and VmHWM. Fails unless it exits 0 and `check` accepts its output. */
async function timedChild(child: Child, check: (output: string) => void): Promise<{ seconds: number; peak: number }> {
  const watch = new ProcWatch(50);
  watch.watch('child', child.pid);
  const { code } = await child.exited;
  const seconds = (Date.now() - child.startedAt) / 1000;
  const peak = watch.peakRssMb('child');
  watch.stop();
  if (code !== 0) throw new Error(`exited with ${code}:\n${child.output()}`);
  check(child.output());
  return { seconds, peak };
}

export const scale: Benchmark = {
  name: 'scale',
  async run(ctx: BenchContext) {
    const e2eRows = ctx.quick ? 1000 : 10_000;
    const sizes = ctx.quick ? [1000, 10_000] : [10_000, 100_000];
    const stack = await Stack.start({
      name: 'scale',
      count: false,
      sim: simulatorSettings({ generationMs: { min: 0, max: 0 } }),
      workerEnv: ZERO_LATENCY_WORKER_ENV,
    });
    const timed: Timed[] = [];
    let e2e: { seconds: number; rows: number; succeeded: number; workerPeak: number; cliPeak: number; runs: number };
    let workerAtReady: number;
    try {
      for (const rows of sizes) {
        const file = path.join(stack.dir, `rich-${rows}.csv`);
        await writeRichBatchFile(file, rows);
        const fileMb = statSync(file).size / 2 ** 20;
        ctx.log(`scale: validating ${rows} rows`);
        const validate = await timedChild(
          startCli(['validate', file, '--json'], {
            temporalAddress: stack.server.address,
            taskQueue: stack.taskQueue,
            cwd: stack.dir,
          }),
          (out) => {
            if (!new RegExp(`"validRows":\\s*${rows}\\b`).test(out))
              throw new Error(`validate did not count ${rows} valid rows`);
          },
        );
        timed.push({
          what: '`imagebatch validate` (CLI process)',
          rows,
          fileMb,
          seconds: validate.seconds,
          peakRssMb: validate.peak,
        });
        const alone = await timedChild(
          new Child(spawn(process.execPath, ['-e', VALIDATE_ONLY, file], { stdio: ['ignore', 'pipe', 'pipe'] })),
          (out) => {
            if (!out.includes(`"validRows":${rows}`))
              throw new Error(`the validator did not count ${rows} rows: ${out}`);
          },
        );
        timed.push({
          what: 'validator alone (own process)',
          rows,
          fileMb,
          seconds: alone.seconds,
          peakRssMb: alone.peak,
        });
        ctx.log(`scale: reading ${rows} rows page by page`);
        const pages = await timedChild(
          new Child(spawn(process.execPath, ['-e', READ_PAGES, file], { stdio: ['ignore', 'pipe', 'pipe'] })),
          (out) => {
            if (!out.includes(`"rows":${rows}`)) throw new Error(`the page reader did not give ${rows} rows: ${out}`);
          },
        );
        timed.push({
          what: 'page reader, 100 rows a page (own process)',
          rows,
          fileMb,
          seconds: pages.seconds,
          peakRssMb: pages.peak,
        });
      }

      const file = path.join(stack.dir, 'e2e.csv');
      await writeBatchFile(file, e2eRows);
      workerAtReady = stack.watch.peakRssMb(Proc.Worker);
      ctx.log(`scale: ${e2eRows}-row batch end to end`);
      const run = await stack.runBatch(file, 'scale', ORCHESTRATION_CONCURRENCY, 2 * 60 * 60_000);
      e2e = {
        seconds: run.seconds,
        rows: e2eRows,
        succeeded: run.progress.counts.succeeded,
        workerPeak: stack.watch.peakRssMb(Proc.Worker),
        cliPeak: run.cliPeakRssMb,
        runs: run.progress.runs,
      };
      ctx.log(`scale: ${e2eRows} rows in ${run.seconds.toFixed(1)} s`);
    } finally {
      await stack.close();
    }

    const validations = timed.filter((t) => t.what.includes('imagebatch validate'));
    const [small, large] = validations;
    const largest = large ?? small;
    const rowsOf = (t: Timed): Cell[] => [
      t.what,
      num(t.rows),
      num(t.fileMb, 1),
      num(t.seconds, 2),
      num(t.rows / t.seconds),
      num(t.peakRssMb),
    ];
    const table: Table = {
      title: `4. Scale (validation and page reading of ${num(sizes[0] ?? 0)} and ${num(sizes[1] ?? 0)} rows; a ${num(e2eRows)}-row batch end to end)`,
      headers: ['what', 'rows', 'file MB', 'seconds', 'rows/s', 'peak RSS MB'],
      rows: [
        ...timed.map(rowsOf),
        [
          `batch end to end: worker (CLI ${num(e2e.cliPeak)} MB peak)`,
          `${num(e2e.succeeded)} / ${num(e2e.rows)}`,
          '',
          num(e2e.seconds, 1),
          num(e2e.rows / e2e.seconds, 1),
          num(e2e.workerPeak),
        ],
      ],
      notes: [
        largest
          ? `Goal: validation of ${num(largest.rows)} rows in under ${VALIDATION_GOAL_S} s: ` +
            `${verdict(largest.seconds < VALIDATION_GOAL_S)} (${num(largest.seconds, 2)} s, CLI start-up included).`
          : 'no validation measured',
        small && large
          ? `Growth: ${num(large.rows / small.rows)}x the rows took ${num(large.seconds / small.seconds, 1)}x the time ` +
            `to validate (the CLI's start-up, about the same for both, makes the ratio smaller than the rows' ratio).`
          : '',
        `Goal: worker peak RSS under ${WORKER_RSS_GOAL_MB} MB during the ${num(e2eRows)}-row batch: ` +
          `${verdict(e2e.workerPeak < WORKER_RSS_GOAL_MB)} (${num(e2e.workerPeak)} MB peak, VmHWM; ${num(workerAtReady)} MB ` +
          `once it polled, with its cached workflow bundle). The batch ran in ${e2e.runs} runs (continue-as-new), with ` +
          `\`--concurrency ${ORCHESTRATION_CONCURRENCY}\` against the zero-latency simulator.`,
      ].filter(Boolean),
    };
    return { table };
  },
};
