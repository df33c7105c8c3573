/**
 * Where the worker's memory goes as a batch runs: one batch against the zero-latency simulator per variant of the
 * worker's settings, back to back, each with a fresh stack. The worker runs with ./lib/heap-probe.cjs preloaded:
 * after a full GC every few seconds, the V8 heap of its main thread and of its workflow thread, and its resident set.
 * A variant's growth is the slope of each against the rows ended, fitted after the first 10% of the rows (the
 * warm-up): what is left of the resident set's slope once the heaps' are taken out is native memory (the SDK's core,
 * the allocator).
 *
 *   npx tsx bench/memory.ts                                   # 20,000 rows, the defaults
 *   npx tsx bench/memory.ts --rows 20000 - MALLOC_ARENA_MAX=2 IMAGEBATCH_MAX_CACHED_WORKFLOWS=200
 *   npx tsx bench/memory.ts --rows 5000 --snapshots 10,40 -   # heap snapshots of each thread at samples 10 and 40
 *
 * A variant is `-` (the defaults) or comma-separated KEY=VALUE settings of the worker's environment.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureDistIsFresh } from '../test/helpers/dist';
import { writeBatchFile } from './lib/batch-file';
import { SeriesSampler, type SeriesPoint } from './lib/series';
import { simulatorSettings } from './lib/settings';
import { Proc, Stack } from './lib/stack';
import { num, toMarkdown } from './lib/table';
import { ORCHESTRATION_CONCURRENCY, ZERO_LATENCY_WORKER_ENV } from './orchestration';

const PROBE = path.join(__dirname, 'lib', 'heap-probe.cjs');
const PROBE_EVERY_MS = 5000;
/** The share of the rows counted as warm-up, left out of the slopes. */
const WARM_UP = 0.1;

/** One line of the probe. */
interface ProbeLine {
  thread: number;
  at: number;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
}

interface VariantRun {
  name: string;
  rows: number;
  seconds: number;
  peakRssMb: number;
  /** MB per 10,000 rows after the warm-up: resident set, main thread's heap, workflow thread's heap. */
  slopes: { rss: number; main: number; workflow: number };
  /** The last sample's figures (MB). */
  end: { rss: number; main: number; workflow: number };
  /** The first sample after the warm-up (MB). */
  warm: { rss: number; main: number; workflow: number };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let rows = 20_000;
  let snapshots = '';
  const variants: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--rows') rows = Number(args[++i]);
    else if (arg === '--snapshots') snapshots = args[++i] ?? '';
    else variants.push(arg);
  }
  if (!Number.isInteger(rows) || rows < 100) throw new Error(`--rows is a whole number of at least 100, not ${rows}`);
  const log = (line: string) => process.stderr.write(`[memory ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  await ensureDistIsFresh();
  const runs: VariantRun[] = [];
  for (const variant of variants.length ? variants : ['-']) {
    log(`${variant}: ${rows} rows`);
    runs.push(await runVariant(variant, rows, snapshots, log));
  }
  const mb = (n: number) => num(n, 1);
  process.stdout.write(
    `${toMarkdown({
      title: `Worker memory, ${num(rows)} rows a variant (zero-latency simulator, --concurrency ${ORCHESTRATION_CONCURRENCY})`,
      headers: [
        'variant',
        'rows/s',
        'RSS MB after warm-up → end (peak)',
        'main heap MB',
        'workflow heap MB',
        'RSS MB/10k rows',
        'main heap MB/10k',
        'workflow heap MB/10k',
      ],
      rows: runs.map((r) => [
        r.name,
        num(r.rows / r.seconds, 1),
        `${mb(r.warm.rss)} → ${mb(r.end.rss)} (${mb(r.peakRssMb)})`,
        `${mb(r.warm.main)} → ${mb(r.end.main)}`,
        `${mb(r.warm.workflow)} → ${mb(r.end.workflow)}`,
        mb(r.slopes.rss),
        mb(r.slopes.main),
        mb(r.slopes.workflow),
      ]),
      notes: [
        `Heaps are measured after a full GC (the probe, every ${PROBE_EVERY_MS / 1000} s); slopes are least-squares ` +
          `fits against the rows ended, after the first ${WARM_UP * 100}% of the rows.`,
        'The resident set less the heaps is native memory: the SDK core, V8 itself, the allocator.',
      ],
    })}\n`,
  );
}

async function runVariant(
  variant: string,
  rows: number,
  snapshots: string,
  log: (line: string) => void,
): Promise<VariantRun> {
  const settings = variant === '-' ? {} : parseSettings(variant);
  // Outside the stack's folder, which its close removes: heap snapshots are kept.
  const probeDir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-memory-'));
  const probeFile = path.join(probeDir, 'heap-probe.jsonl');
  const stack = await Stack.start({
    name: 'memory',
    count: false,
    sim: simulatorSettings({ generationMs: { min: 0, max: 0 } }),
    workerEnv: {
      ...ZERO_LATENCY_WORKER_ENV,
      ...settings,
      HEAP_PROBE_OUT: probeFile,
      HEAP_PROBE_EVERY_MS: String(PROBE_EVERY_MS),
      ...(snapshots ? { HEAP_PROBE_SNAPSHOTS: snapshots } : {}),
    },
    workerNodeArgs: ['--expose-gc', '-r', PROBE],
  });
  try {
    const file = path.join(stack.dir, 'batch.csv');
    await writeBatchFile(file, rows);
    const sampler = new SeriesSampler(stack, 'memory', [Proc.Worker], PROBE_EVERY_MS);
    const cli = stack.startRun(file, 'memory', ORCHESTRATION_CONCURRENCY);
    const samplerStart = Date.now();
    sampler.start();
    const run = await stack.finishRun(cli, 3 * 60 * 60_000);
    const points = await sampler.stop(run.progress);
    const probe = (await readFile(probeFile, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ProbeLine);
    if (snapshots) log(`${variant}: heap snapshots in ${probeDir}`);
    return summarise(variant, rows, run.seconds, stack.watch.peakRssMb(Proc.Worker), probe, points, samplerStart);
  } finally {
    await stack.close();
    if (!snapshots) await rm(probeDir, { recursive: true, force: true });
  }
}

function parseSettings(variant: string): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const pair of variant.split(',')) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new Error(`a variant is - or KEY=VALUE[,KEY=VALUE...], not ${JSON.stringify(variant)}`);
    settings[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return settings;
}

/** Rows ended at `at` (ms since the epoch), interpolated between the series' samples. */
function rowsAt(points: readonly SeriesPoint[], start: number, at: number): number {
  const t = (at - start) / 1000;
  let prev: SeriesPoint | undefined;
  for (const p of points) {
    if (p.t >= t) {
      if (!prev || p.t === prev.t) return p.rowsDone;
      return prev.rowsDone + ((p.rowsDone - prev.rowsDone) * (t - prev.t)) / (p.t - prev.t);
    }
    prev = p;
  }
  return prev?.rowsDone ?? 0;
}

/** Least-squares slope of y against x. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return Number.NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  return sxx === 0 ? Number.NaN : sxy / sxx;
}

function summarise(
  name: string,
  rows: number,
  seconds: number,
  peakRssMb: number,
  probe: readonly ProbeLine[],
  points: readonly SeriesPoint[],
  samplerStart: number,
): VariantRun {
  // The main thread is thread 0; the SDK's workflow thread is the other one.
  const main = probe.filter((p) => p.thread === 0);
  const workflow = probe.filter((p) => p.thread !== 0);
  const after = (lines: readonly ProbeLine[]) =>
    lines
      .map((l) => ({ line: l, rows: rowsAt(points, samplerStart, l.at) }))
      .filter((x) => x.rows >= rows * WARM_UP && x.rows < rows);
  const m = after(main);
  const w = after(workflow);
  const per10k = (xs: typeof m, pick: (l: ProbeLine) => number) =>
    slope(
      xs.map((x) => x.rows),
      xs.map((x) => pick(x.line)),
    ) * 10_000;
  const first = m[0]?.line;
  const last = main.at(-1);
  return {
    name,
    rows,
    seconds,
    peakRssMb,
    slopes: {
      rss: per10k(m, (l) => l.rssMb),
      main: per10k(m, (l) => l.heapUsedMb),
      workflow: per10k(w, (l) => l.heapUsedMb),
    },
    warm: { rss: first?.rssMb ?? NaN, main: first?.heapUsedMb ?? NaN, workflow: w[0]?.line.heapUsedMb ?? NaN },
    end: { rss: last?.rssMb ?? NaN, main: last?.heapUsedMb ?? NaN, workflow: workflow.at(-1)?.heapUsedMb ?? NaN },
  };
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
