/**
 * A time series of one batch as it runs: every few seconds, the resident set (VmRSS, from /proc) of the processes
 * of a {@link Stack} and the batch's progress (its `progress` query: rows ended, continue-as-new runs) and the
 * length of its current run's history (describe). Summarised as a markdown table and drawn by ./plot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { batchWorkflowId, type BatchProgress } from '../../src/model';
import { progressQuery } from '../../src/workflows/definitions';
import { readProc } from './proc';
import type { Stack } from './stack';
import { num, type Cell } from './table';

/** One sample. */
export interface SeriesPoint {
  /** Seconds since sampling started. */
  t: number;
  /** Rows that ended (every final state), as the batch's last answered query said. */
  rowsDone: number;
  /** Continue-as-new hops of the batch so far. */
  runs: number;
  /** Events in the batch's current run's history (undefined when describe did not answer). */
  historyLength: number | undefined;
  /** VmRSS (MB) by process name; undefined when the process was not running. */
  rssMb: Record<string, number | undefined>;
}

/** Rows that ended, from a progress. */
export function rowsDone(progress: BatchProgress): number {
  return Object.values(progress.counts).reduce((a, b) => a + b, 0);
}

/**
 * Samples `names` (process names of the stack's {@link ProcWatch}) and the batch `batchId` every `everyMs` from
 * {@link start} to {@link stop}. A query that does not answer (the batch between two runs, or not started yet)
 * keeps the previous figures.
 */
export class SeriesSampler {
  private readonly points: SeriesPoint[] = [];
  private running = false;
  private loop: Promise<void> | undefined;
  private t0 = 0;

  constructor(
    private readonly stack: Stack,
    private readonly batchId: string,
    private readonly names: readonly string[],
    private readonly everyMs: number,
  ) {}

  start(): void {
    this.running = true;
    this.t0 = Date.now();
    this.loop = this.run();
  }

  /** Stops and takes one last sample (the final progress, when given, replaces the query's). */
  async stop(final?: BatchProgress): Promise<SeriesPoint[]> {
    this.running = false;
    await this.loop;
    const last = await this.sample();
    if (final) Object.assign(last, { rowsDone: rowsDone(final), runs: final.runs });
    this.points.push(last);
    return this.points;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const started = Date.now();
      this.points.push(await this.sample());
      const wait = this.everyMs - (Date.now() - started);
      for (let left = wait; left > 0 && this.running; left -= 100) await sleep(Math.min(100, left));
    }
  }

  private async sample(): Promise<SeriesPoint> {
    const t = (Date.now() - this.t0) / 1000;
    const rssMb: Record<string, number | undefined> = {};
    for (const name of this.names) {
      const pid = this.stack.watch.pid(name);
      // A process just spawned may show no resident set yet (0): no reading then.
      rssMb[name] = pid === undefined ? undefined : readProc(pid)?.rssMb || undefined;
    }
    const previous = this.points.at(-1);
    let done = previous?.rowsDone ?? 0;
    let runs = previous?.runs ?? 0;
    let historyLength: number | undefined;
    const client = this.stack.client;
    if (client) {
      const handle = client.workflow.getHandle(batchWorkflowId(this.batchId));
      // A busy machine answers slowly: both at once, each given up to an interval.
      const deadline = Date.now() + Math.max(2000, this.everyMs);
      const [progress, description] = await Promise.allSettled([
        client.withDeadline(deadline, () => handle.query(progressQuery)),
        client.withDeadline(deadline, () => handle.describe()),
      ]);
      // Not started yet, between two runs, or busy: the previous figures stand.
      if (progress.status === 'fulfilled') {
        done = rowsDone(progress.value);
        runs = progress.value.runs;
      }
      if (description.status === 'fulfilled') historyLength = description.value.historyLength;
    }
    return { t, rowsDone: done, runs, historyLength, rssMb };
  }
}

/** Rows per second between two samples. */
function rate(a: SeriesPoint, b: SeriesPoint): number {
  return b.t > a.t ? (b.rowsDone - a.rowsDone) / (b.t - a.t) : 0;
}

/** Rows per second at each sample, over the `window` samples before it (the first sample: 0). */
export function ratesOf(points: readonly SeriesPoint[], window = 3): number[] {
  return points.map((p, i) => (i === 0 ? 0 : rate(points[Math.max(0, i - window)]!, p)));
}

/**
 * The table of a series: one row per tenth of the elapsed time (the sample nearest to it), with rows done, rows/s
 * since the previous row of the table, and the RSS of each of `names`.
 */
export function seriesTable(
  points: readonly SeriesPoint[],
  names: readonly string[],
): { headers: string[]; rows: Cell[][] } {
  const headers = ['elapsed s', 'rows done', 'rows/s (interval)', ...names.map((n) => `${n} RSS MB`), 'history'];
  const end = points.at(-1)?.t ?? 0;
  const chosen: SeriesPoint[] = [];
  for (let k = 1; k <= 10; k++) {
    const at = (end * k) / 10;
    const nearest = points.reduce<SeriesPoint | undefined>(
      (best, p) => (best === undefined || Math.abs(p.t - at) < Math.abs(best.t - at) ? p : best),
      undefined,
    );
    if (nearest && !chosen.includes(nearest)) chosen.push(nearest);
  }
  const first = points[0];
  const rows = chosen.map((p, i) => {
    const before = i === 0 ? first : chosen[i - 1];
    return [
      num(p.t, 0),
      num(p.rowsDone),
      before ? num(rate(before, p), 1) : '',
      ...names.map((n) => (p.rssMb[n] === undefined ? '' : num(p.rssMb[n], 0))),
      p.historyLength === undefined ? '' : num(p.historyLength),
    ];
  });
  return { headers, rows };
}

/** How the worker's RSS moved after warm-up; see {@link flatness}. */
export interface Flatness {
  /** Mean RSS (MB) of the samples in the first half of the run after warm-up. */
  firstHalfMb: number;
  /** Mean RSS (MB) of the samples in the second half. */
  secondHalfMb: number;
  /** secondHalfMb / firstHalfMb - 1. */
  growth: number;
  flat: boolean;
  /** Samples the judgement rests on. */
  samples: number;
}

/** The largest growth from the first to the second half after warm-up that still counts as flat. */
export const FLAT_TOLERANCE = 0.1;

/**
 * Whether `name`'s RSS is flat after warm-up: the samples taken once `warmUpShare` of `totalRows` had ended are
 * split in two halves by time; flat when the second half's mean is at most {@link FLAT_TOLERANCE} above the
 * first's. Undefined with fewer than 4 such samples.
 */
export function flatness(
  points: readonly SeriesPoint[],
  name: string,
  totalRows: number,
  warmUpShare = 0.1,
): Flatness | undefined {
  const after = points.filter((p) => p.rowsDone >= totalRows * warmUpShare && p.rssMb[name] !== undefined);
  if (after.length < 4) return undefined;
  const start = after[0]!.t;
  const middle = (start + after.at(-1)!.t) / 2;
  const mean = (ps: SeriesPoint[]) => ps.reduce((a, p) => a + (p.rssMb[name] ?? 0), 0) / Math.max(1, ps.length);
  const firstHalfMb = mean(after.filter((p) => p.t <= middle));
  const secondHalfMb = mean(after.filter((p) => p.t > middle));
  const growth = secondHalfMb / firstHalfMb - 1;
  return { firstHalfMb, secondHalfMb, growth, flat: growth <= FLAT_TOLERANCE, samples: after.length };
}
