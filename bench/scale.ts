/**
 * 4. Scale: 10,000- and 100,000-row files through validation (the CLI, `imagebatch validate`) and page reading
 * (the built page reader, page by page as the batch workflow reads them), each in its own process for its peak RSS;
 * then a 100,000-row batch end to end (1,000 with --quick) against the zero-latency simulator, with the RSS of the
 * worker, the CLI and the dev server and the rows done sampled over time: a table, and a plot (SVG) beside the
 * tables. Goals: validation of 100,000 rows in under 5 s; every row of the batch in one final state; worker peak
 * RSS under 300 MB and flat after warm-up; the batch's history per run bounded.
 */
import { spawn } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { writeBatchFile, writeRichBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { svgChart } from './lib/plot';
import { Child, REPO_ROOT, startCli } from './lib/processes';
import { ProcWatch } from './lib/proc';
import {
  FLAT_TOLERANCE,
  flatness,
  ratesOf,
  rowsDone,
  SeriesSampler,
  seriesTable,
  type SeriesPoint,
} from './lib/series';
import { simulatorSettings } from './lib/settings';
import { type BatchRun, Proc, Stack } from './lib/stack';
import { num, verdict, type Cell, type Table } from './lib/table';
import { ORCHESTRATION_CONCURRENCY, ZERO_LATENCY_WORKER_ENV } from './orchestration';

export const VALIDATION_GOAL_S = 5;
export const WORKER_RSS_GOAL_MB = 300;
/** Events of one run of the batch's history before it continues as new (the batch workflow's default). */
const BATCH_MAX_HISTORY_EVENTS = 10_000;
/** Events a run may pass {@link BATCH_MAX_HISTORY_EVENTS} by: those of the workflow tasks before it checks. */
const HISTORY_SLACK_EVENTS = 1000;
/** The processes whose RSS the series follows. */
const SERIES = [Proc.Worker, Proc.Cli, Proc.Server] as const;

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
    const e2eRows = ctx.quick ? 1000 : 100_000;
    const sizes = ctx.quick ? [1000, 10_000] : [10_000, 100_000];
    const stack = await Stack.start({
      name: 'scale',
      count: false,
      sim: simulatorSettings({ generationMs: { min: 0, max: 0 } }),
      workerEnv: ZERO_LATENCY_WORKER_ENV,
    });
    const timed: Timed[] = [];
    let e2e: {
      seconds: number;
      rows: number;
      counts: Record<string, number>;
      ended: number;
      workerPeak: number;
      cliPeak: number;
      serverPeak: number;
      runs: number;
      points: SeriesPoint[];
    };
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
      const cli = stack.startRun(file, 'scale', ORCHESTRATION_CONCURRENCY);
      const sampler = new SeriesSampler(stack, 'scale', SERIES, sampleEveryMs(ctx));
      sampler.start();
      let run: BatchRun;
      try {
        run = await stack.finishRun(cli, 3 * 60 * 60_000);
      } catch (err) {
        await sampler.stop();
        throw err;
      }
      const points = await sampler.stop(run.progress);
      e2e = {
        seconds: run.seconds,
        rows: e2eRows,
        counts: run.progress.counts,
        ended: rowsDone(run.progress),
        workerPeak: stack.watch.peakRssMb(Proc.Worker),
        cliPeak: run.cliPeakRssMb,
        serverPeak: stack.watch.peakRssMb(Proc.Server),
        runs: run.progress.runs,
        points,
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
          `batch end to end: worker (CLI ${num(e2e.cliPeak)} MB, dev server ${num(e2e.serverPeak)} MB peak)`,
          `${num(e2e.counts.succeeded ?? 0)} / ${num(e2e.rows)}`,
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
        `Goal: every row of the ${num(e2eRows)}-row batch in one final state: ${verdict(e2e.ended === e2eRows)} ` +
          `(${Object.entries(e2e.counts)
            .filter(([, n]) => n > 0)
            .map(([state, n]) => `${num(n)} ${state}`)
            .join(', ')}).`,
        `Goal: worker peak RSS under ${WORKER_RSS_GOAL_MB} MB during the ${num(e2eRows)}-row batch: ` +
          `${verdict(e2e.workerPeak < WORKER_RSS_GOAL_MB)} (${num(e2e.workerPeak)} MB peak, VmHWM; ${num(workerAtReady)} MB ` +
          `once it polled, with its cached workflow bundle). The batch ran in ${e2e.runs} runs (continue-as-new), with ` +
          `\`--concurrency ${ORCHESTRATION_CONCURRENCY}\` against the zero-latency simulator; the worker's settings: ` +
          `${workerSettings()}.`,
      ].filter(Boolean),
    };
    return { table, more: [seriesSection(ctx, e2e.points, e2eRows)] };
  },
};

/** The worker's settings, as the bench runs it: those set, and the default of the one that bounds its memory. */
function workerSettings(): string {
  const env: Record<string, string> = ZERO_LATENCY_WORKER_ENV;
  const cache = env.IMAGEBATCH_MAX_CACHED_WORKFLOWS ?? "the SDK's default";
  return [...Object.entries(env).map(([k, v]) => `${k}=${v}`), `IMAGEBATCH_MAX_CACHED_WORKFLOWS ${cache}`].join(', ');
}

/** How often the series samples. */
const sampleEveryMs = (ctx: BenchContext) => (ctx.quick ? 1000 : 5000);

/** The batch's time series: its table (with the flatness, history and plot notes), and its plot written. */
function seriesSection(ctx: BenchContext, points: readonly SeriesPoint[], totalRows: number): Table {
  const { headers, rows } = seriesTable(points, SERIES);
  const flat = flatness(points, Proc.Worker, totalRows);
  const histories = points.map((p) => p.historyLength ?? 0);
  const longest = Math.max(0, ...histories);
  const bounded = longest <= BATCH_MAX_HISTORY_EVENTS + HISTORY_SLACK_EVENTS;
  const runs = points.at(-1)?.runs ?? 0;
  const svg = ctx.artifact('scale.svg');
  const rates = ratesOf(points);
  writeFileSync(
    svg,
    svgChart({
      title: `${num(totalRows)}-row batch end to end (zero-latency simulator): RSS and rows/s`,
      xLabel: 'elapsed time (s)',
      leftLabel: 'RSS (MB)',
      rightLabel: 'rows/s',
      leftMarks: [{ y: WORKER_RSS_GOAL_MB, label: `worker goal: ${WORKER_RSS_GOAL_MB} MB` }],
      lines: [
        ...SERIES.map((name, i) => ({
          name: `${name} RSS`,
          color: ['#1f77b4', '#2ca02c', '#9467bd'][i] ?? 'black',
          points: points.flatMap((p) => (p.rssMb[name] === undefined ? [] : [[p.t, p.rssMb[name]] as const])),
        })),
        {
          name: 'rows/s',
          color: '#ff7f0e',
          axis: 'right' as const,
          dashed: true,
          points: points.map((p, i) => [p.t, rates[i] ?? 0] as const),
        },
      ],
    }),
  );
  ctx.log(`scale: plot written to ${svg}`);
  return {
    title: `4b. Scale over time (the ${num(totalRows)}-row batch, sampled every ${sampleEveryMs(ctx) / 1000} s)`,
    headers,
    rows,
    notes: [
      `One row per tenth of the run (the sample nearest to it); rows/s over the interval since the row above; RSS is ` +
        `VmRSS read from /proc; history: events in the batch's current run (describe).`,
      flat
        ? `Goal: worker RSS flat after warm-up: ${verdict(flat.flat)} (the rule: of the ${flat.samples} samples ` +
          `taken once 10% of the rows had ended, the second half's mean RSS is at most ` +
          `${num(FLAT_TOLERANCE * 100)}% above the first half's; here ${num(flat.firstHalfMb)} MB then ` +
          `${num(flat.secondHalfMb)} MB, ` +
          `${flat.growth >= 0 ? '+' : ''}${num(flat.growth * 100, 1)}%).`
        : 'Goal: worker RSS flat after warm-up: not judged (fewer than 4 samples after the first 10% of rows).',
      `Goal: the batch's history per run bounded: ${verdict(bounded)} (at most ` +
        `${num(longest)} events seen in one run, over ${runs} runs; the batch continues as new at ` +
        `${num(BATCH_MAX_HISTORY_EVENTS)} events or when Temporal suggests it).`,
      `Plot: ${svg} (RSS of the worker, the CLI and the dev server, left axis; rows/s over the last 3 samples, right ` +
        `axis, dashed).`,
    ],
  };
}
