/**
 * 1. Rate-limit utilisation: a batch against a service that allows 20 requests/s per key, with generation times of
 * 1 to 3 s, a minimum poll interval of 1 s and a few percent of faults after the charge (500s and connection
 * resets). How close does imagebatch get to the lower bound (the requests a row needs, divided by the rate), how
 * many 429s does it meet, how many polls per creation, and is anything charged twice?
 */
import path from 'node:path';
import { writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import type { SimHostReport } from './lib/sim-protocol';
import { simulatorSettings, type SimSettings } from './lib/settings';
import { Proc, Stack } from './lib/stack';
import { num, verdict, type Table } from './lib/table';

/** The service of benchmarks 1 and 2: both clients meet exactly this. */
export const RATE_LIMITED_SERVICE = {
  generationMs: { min: 1000, max: 3000 },
  requestsPerSecond: 20,
  minPollIntervalMs: 1000,
  faults: { internal_after_charge: 0.02, reset_after_commit: 0.02 },
} as const satisfies SimSettings;

/**
 * The task-queue rate limit of the worker (IMAGEBATCH_RATE_LIMIT): just under the service's rate, because the
 * server's limiter and the service's token bucket do not tick in step.
 */
export const WORKER_RATE = 19;
/** Rows in flight: more than the rate needs, so that the limiter, not the window, sets the pace. */
export const UTILISATION_CONCURRENCY = 60;

export function utilisationRows(quick: boolean): number {
  return quick ? 200 : 2000;
}

/** What benchmark 2 compares against. */
export interface UtilisationResult {
  rows: number;
  seconds: number;
  report: SimHostReport;
  succeeded: number;
}

/** The lower bound of a batch's wall time: one submission plus ceil(g / interval) + 1 polls per row, at the rate. */
export function lowerBoundSeconds(rows: number, report: SimHostReport): number {
  return (rows * (1 + report.meanReferencePolls)) / RATE_LIMITED_SERVICE.requestsPerSecond;
}

export function tooManyOf(report: SimHostReport): number {
  return report.statuses['429'] ?? 0;
}

export function pct(part: number, whole: number): string {
  return whole ? `${num((part / whole) * 100, 2)}%` : 'n/a';
}

export const utilisation: Benchmark = {
  name: 'utilisation',
  async run(ctx: BenchContext) {
    const rows = utilisationRows(ctx.quick);
    const stack = await Stack.start({
      name: 'utilisation',
      sim: simulatorSettings({ ...RATE_LIMITED_SERVICE, faults: { ...RATE_LIMITED_SERVICE.faults } }),
      workerEnv: {
        IMAGEBATCH_RATE_LIMIT: String(WORKER_RATE),
        IMAGEGEN_MIN_POLL_INTERVAL_MS: String(RATE_LIMITED_SERVICE.minPollIntervalMs),
      },
    });
    let result: UtilisationResult;
    let workerCpu: number;
    try {
      const file = path.join(stack.dir, 'utilisation.csv');
      await writeBatchFile(file, rows);
      ctx.log(`utilisation: imagebatch, ${rows} rows at ${RATE_LIMITED_SERVICE.requestsPerSecond} requests/s`);
      stack.watch.mark();
      const run = await stack.runBatch(file, 'utilisation', UTILISATION_CONCURRENCY, 60 * 60_000);
      workerCpu = stack.watch.cpu(Proc.Worker);
      result = {
        rows,
        seconds: run.seconds,
        report: await stack.sim.report(),
        succeeded: run.progress.counts.succeeded,
      };
      ctx.log(`utilisation: ${rows} rows in ${run.seconds.toFixed(1)} s, ${JSON.stringify(run.progress.counts)}`);
    } finally {
      await stack.close();
    }
    const { report, seconds } = result;
    const bound = lowerBoundSeconds(rows, report);
    const tooMany = tooManyOf(report);
    const table: Table = {
      title: `1. Rate-limit utilisation (${num(rows)} rows, ${RATE_LIMITED_SERVICE.requestsPerSecond} requests/s, generation 1-3 s, poll interval 1 s)`,
      headers: [
        'rows ok',
        'wall s',
        'lower bound s',
        'wall / bound',
        'requests',
        'requests/s',
        '429s',
        'polls/creation',
        'ceil(g/i)+1',
        'double charges',
        'worker CPU s',
      ],
      rows: [
        [
          `${num(result.succeeded)} / ${num(rows)}`,
          num(seconds, 1),
          num(bound, 1),
          num(seconds / bound, 3),
          num(report.requests),
          num(report.requests / seconds, 2),
          `${num(tooMany)} (${pct(tooMany, report.requests)})`,
          num(report.meanPollsPerCreation, 2),
          num(report.meanReferencePolls, 2),
          num(report.doubleCharges),
          num(workerCpu, 1),
        ],
      ],
      notes: [
        `Goals: wall time within 1.15x the lower bound: ${verdict(seconds <= 1.15 * bound)}; 429s at most 1% of ` +
          `requests: ${verdict(tooMany <= 0.01 * report.requests)}` +
          `${tooMany ? ` (${JSON.stringify(report.tooManyByReason)})` : ''}; zero double charges: ${verdict(report.doubleCharges === 0 && report.chargedTwiceByKey === 0)}.`,
        `Lower bound = rows x (1 submission + mean ceil(g / 1 s) + 1 polls) / ${RATE_LIMITED_SERVICE.requestsPerSecond} ` +
          `requests/s, with g each creation's own generation time (mean ${num(report.meanGenerationMs)} ms).`,
        `Faults: ${Object.entries(RATE_LIMITED_SERVICE.faults)
          .map(([k, p]) => `${k} ${p * 100}%`)
          .join(
            ', ',
          )} of submissions; answers on the wire: ${JSON.stringify(report.statuses)} (0 = connection reset). ` +
          `Ledger: ${num(report.charges)} charges, ${num(report.refunds)} refunds, ${num(report.creations)} creations.`,
        `Settings: worker \`IMAGEBATCH_RATE_LIMIT=${WORKER_RATE}\` (the Temporal server's task-queue limit), ` +
          `\`IMAGEGEN_MIN_POLL_INTERVAL_MS=1000\`, \`imagebatch run --concurrency ${UTILISATION_CONCURRENCY}\`.`,
      ],
    };
    return { table, result };
  },
};
