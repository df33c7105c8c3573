/**
 * 1. Rate-limit utilisation: a batch against a service that allows 20 requests/s per key, with a minimum poll
 * interval of 1 s and a few percent of faults after the charge (500s and connection resets), in three service
 * cases: generation times uniform in 1-3 s, log-normal with a long tail, and two models of different speeds in one
 * batch; and a fourth where the account's 8 creations in flight bind, not the rate. How close does imagebatch get to the lower bound (one submission and one poll per row, plus the batch's
 * catalog requests, divided by the rate), how many requests per row, how many polls find a creation still running,
 * how many 429s does it meet, and is anything charged twice?
 */
import path from 'node:path';
import { writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import type { BindingLimit } from '../src/model';
import type { SimHostReport } from './lib/sim-protocol';
import { simulatorSettings, type SimSettings } from './lib/settings';
import { Proc, Stack, type StackOptions } from './lib/stack';
import { num, verdict, type Cell, type Table } from './lib/table';

/** The service of benchmarks 1 and 2 (its first case, uniform generation times): both clients meet exactly this. */
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
/**
 * The service of the concurrency-bound case: 8 creations in flight per account (contract-defaults.md's default) and a
 * rate ten times what the quota lets a batch use, so that the quota binds.
 */
export const QUOTA_BOUND_SERVICE = { accountConcurrency: 8, requestsPerSecond: 200 } as const;

/** Rows in flight: more than the rate needs, so that the limiter, not the window, sets the pace. */
export const UTILISATION_CONCURRENCY = 60;

export function utilisationRows(quick: boolean): number {
  return quick ? 200 : 2000;
}

/** Rows of the concurrency-bound case: 8 in flight for about 2 s each is 4 rows/s, so fewer rows than at 20 requests/s. */
export function quotaBoundRows(quick: boolean): number {
  return quick ? 100 : 600;
}

/** The limit a case is built to bind: one of the service's. */
export type CaseLimit = Exclude<BindingLimit, 'open'>;

/** One service case of benchmark 1: the generation times the batch meets, and its goal. */
export interface ServiceCase {
  /** The row's label. */
  name: string;
  /** Generation times (every model, or those without their own). */
  generationMs: SimSettings['generationMs'];
  /**
   * Models with generation times of their own.
   * @default none
   */
  models?: SimSettings['models'];
  /** The rows' models, taken in turn. */
  batchModels: readonly string[];
  /** Goal: wall time / bound at most this. */
  goal: number;
  /**
   * The limit the case binds, which sets its bound: `rate`, the key's 20 requests/s ({@link lowerBoundSeconds}),
   * or `concurrency`, the account's 8 creations in flight with the rate ample ({@link quotaBoundSeconds}).
   * @default 'rate'
   */
  binds?: CaseLimit;
  /**
   * The worker's `IMAGEGEN_POLL_PLAN`: `interval` polls at the minimum interval, for comparison (`learn` is the default).
   * @default 'learn'
   */
  pollPlan?: 'learn' | 'interval';
  /**
   * Rows in flight (`imagebatch run --concurrency`).
   * @default {@link UTILISATION_CONCURRENCY}
   */
  concurrency?: number;
  /**
   * Everything at the product's defaults: no `--concurrency` (the adaptive window), no `IMAGEBATCH_RATE_LIMIT`, the
   * default poll plan. What a user who sets nothing gets (#32).
   * @default false
   */
  defaults?: boolean;
}

/**
 * The cases, each its own row; the first is {@link RATE_LIMITED_SERVICE}, what the naive script meets, and the
 * second the same polled at the interval (the product's default).
 */
export const SERVICE_CASES: readonly ServiceCase[] = [
  { name: 'uniform 1-3 s', generationMs: RATE_LIMITED_SERVICE.generationMs, batchModels: ['sdxl'], goal: 1.1 },
  {
    name: 'uniform 1-3 s, polled at the interval (IMAGEGEN_POLL_PLAN=interval)',
    generationMs: RATE_LIMITED_SERVICE.generationMs,
    batchModels: ['sdxl'],
    goal: 1.1,
    pollPlan: 'interval',
  },
  {
    name: 'log-normal: median 1.5 s, sigma 0.75, 0.5-20 s',
    generationMs: { min: 500, max: 20_000, shape: 'lognormal', medianMs: 1500, sigma: 0.75 },
    batchModels: ['sdxl'],
    goal: 1.2,
  },
  {
    name: 'two models: flux-schnell 0.5-1.5 s, flux-dev 3-6 s',
    generationMs: RATE_LIMITED_SERVICE.generationMs,
    models: { 'flux-schnell': { min: 500, max: 1500 }, 'flux-dev': { min: 3000, max: 6000 } },
    batchModels: ['flux-schnell', 'flux-dev'],
    goal: 1.1,
  },
  {
    name: 'concurrency-bound: uniform 1-3 s, 8 creations in flight, 200 requests/s',
    generationMs: RATE_LIMITED_SERVICE.generationMs,
    batchModels: ['sdxl'],
    goal: 1.15,
    binds: 'concurrency',
  },
  {
    name: 'default settings, rate-bound: uniform 1-3 s (no --concurrency, no IMAGEBATCH_RATE_LIMIT)',
    generationMs: RATE_LIMITED_SERVICE.generationMs,
    batchModels: ['sdxl'],
    goal: 1.1,
    defaults: true,
  },
  {
    name: 'default settings, concurrency-bound: uniform 1-3 s, 8 creations in flight',
    generationMs: RATE_LIMITED_SERVICE.generationMs,
    batchModels: ['sdxl'],
    goal: 1.15,
    binds: 'concurrency',
    defaults: true,
  },
];

/** Goals of the issue besides the wall time: 429s, polls that found a creation running. */
export const TOO_MANY_GOAL = 0.01;
export const RUNNING_POLLS_GOAL = 0.25;

/**
 * The lower bound of a batch whose account quota binds: every creation holds one of the quota's slots for its
 * generation time, so no client ends sooner than rows x mean generation time / slots.
 */
export function quotaBoundSeconds(rows: number, report: SimHostReport): number {
  return (rows * report.meanGenerationMs) / 1000 / QUOTA_BOUND_SERVICE.accountConcurrency;
}

/** The bound of a case: the rate's or the quota's. */
export function boundSeconds(service: ServiceCase, rows: number, report: SimHostReport): number {
  const binds = service.binds ?? 'rate';
  switch (binds) {
    case 'rate':
      return lowerBoundSeconds(rows, report);
    case 'concurrency':
      return quotaBoundSeconds(rows, report);
    default: {
      const never: never = binds;
      throw new Error(`unknown limit ${String(never)}`);
    }
  }
}

/** What benchmark 2 compares against: the first case. */
export interface UtilisationResult {
  rows: number;
  seconds: number;
  report: SimHostReport;
  succeeded: number;
}

/** The columns of benchmark 1's table. */
export const UTILISATION_HEADERS = [
  'generation times',
  'rows ok',
  'wall s',
  'bound s',
  'wall / bound',
  'requests',
  'requests/row',
  'requests/s',
  '429s',
  'polls/creation',
  'polls finding it running/creation',
  'polls at the interval, ceil(g/i)+1',
  'double charges',
  'worker CPU s',
] as const;

/** One case's run. */
export interface CaseRun extends UtilisationResult {
  service: ServiceCase;
  workerCpu: number;
}

/**
 * The lower bound of a batch's wall time: one submission and one poll per row (no client can do with less), plus
 * the batch's own catalog requests (GET /models), at the key's rate.
 */
export function lowerBoundSeconds(rows: number, report: SimHostReport): number {
  return (rows * 2 + report.catalogRequests) / RATE_LIMITED_SERVICE.requestsPerSecond;
}

/**
 * The former reference, kept as a column so that the change shows: one submission plus ceil(g / interval) + 1
 * polls per row (a client polling at the minimum interval from acceptance), at the rate.
 */
export function intervalPollingSeconds(rows: number, report: SimHostReport): number {
  return (rows * (1 + report.meanReferencePolls)) / RATE_LIMITED_SERVICE.requestsPerSecond;
}

export function tooManyOf(report: SimHostReport): number {
  return report.statuses['429'] ?? 0;
}

export function pct(part: number, whole: number): string {
  return whole ? `${num((part / whole) * 100, 2)}%` : 'n/a';
}

/** The stack of one case: its service (the rate's or the quota's) and its worker's settings. */
export function caseStackOptions(service: ServiceCase, name = 'utilisation'): StackOptions {
  const quotaBound = service.binds === 'concurrency';
  return {
    name,
    sim: simulatorSettings({
      ...RATE_LIMITED_SERVICE,
      ...(quotaBound ? QUOTA_BOUND_SERVICE : {}),
      generationMs: service.generationMs,
      ...(service.models ? { models: service.models } : {}),
      faults: { ...RATE_LIMITED_SERVICE.faults },
    }),
    workerEnv: service.defaults
      ? { IMAGEGEN_MIN_POLL_INTERVAL_MS: String(RATE_LIMITED_SERVICE.minPollIntervalMs) }
      : {
          // 0 = no task-queue limit: the quota, not the rate, is what the concurrency-bound case measures.
          IMAGEBATCH_RATE_LIMIT: String(quotaBound ? 0 : WORKER_RATE),
          IMAGEGEN_MIN_POLL_INTERVAL_MS: String(RATE_LIMITED_SERVICE.minPollIntervalMs),
          IMAGEGEN_POLL_PLAN: service.pollPlan ?? 'learn',
        },
  };
}

/** Rows in flight of a case's `imagebatch run --concurrency`; undefined at default settings (the adaptive window). */
export function caseConcurrency(service: ServiceCase): number | undefined {
  return service.concurrency ?? (service.defaults ? undefined : UTILISATION_CONCURRENCY);
}

/** Runs one case on a stack of its own. */
export async function runCase(ctx: BenchContext, service: ServiceCase, quick: boolean): Promise<CaseRun> {
  const rows = service.binds === 'concurrency' ? quotaBoundRows(quick) : utilisationRows(quick);
  const stack = await Stack.start(caseStackOptions(service));
  try {
    const file = path.join(stack.dir, 'utilisation.csv');
    await writeBatchFile(file, rows, service.batchModels);
    ctx.log(`utilisation (${service.name}): ${rows} rows`);
    stack.watch.mark();
    const run = await stack.runBatch(file, 'utilisation', caseConcurrency(service), 60 * 60_000);
    const workerCpu = stack.watch.cpu(Proc.Worker);
    ctx.log(`utilisation: ${rows} rows in ${run.seconds.toFixed(1)} s, ${JSON.stringify(run.progress.counts)}`);
    return {
      service,
      rows,
      seconds: run.seconds,
      report: await stack.sim.report(),
      succeeded: run.progress.counts.succeeded,
      workerCpu,
    };
  } finally {
    await stack.close();
  }
}

/** A case's row of the table, under {@link UTILISATION_HEADERS}. */
export function caseRow(run: CaseRun): Cell[] {
  const { rows, seconds, report } = run;
  const tooMany = tooManyOf(report);
  return [
    run.service.name,
    `${num(run.succeeded)} / ${num(rows)}`,
    num(seconds, 1),
    num(boundSeconds(run.service, rows, report), 1),
    num(seconds / boundSeconds(run.service, rows, report), 3),
    num(report.requests),
    num(report.requests / rows, 2),
    num(report.requests / seconds, 2),
    `${num(tooMany)} (${pct(tooMany, report.requests)})`,
    num(report.meanPollsPerCreation, 2),
    num(report.meanRunningPollsPerCreation, 2),
    run.service.binds === 'concurrency'
      ? `(the rate does not bind) ${num(report.meanReferencePolls, 2)} polls`
      : `${num(intervalPollingSeconds(rows, report), 1)} s (${num(report.meanReferencePolls, 2)} polls)`,
    num(report.doubleCharges),
    num(run.workerCpu, 1),
  ];
}

/** The goals of one case, met or missed, for the notes. */
function goals(run: CaseRun): string {
  const { rows, seconds, report } = run;
  const ratio = seconds / boundSeconds(run.service, rows, report);
  const tooMany = tooManyOf(report);
  // The 429 goal is the rate-bound cases': where the quota binds, a client that is not told the quota (the
  // interface does not show it) finds it by its 429s, which charge nothing and cost only requests the rate has spare.
  const tooManyGoal =
    run.service.binds === 'concurrency'
      ? `429s (no goal: the quota is found by them) ${pct(tooMany, report.requests)}`
      : `429s at most ${TOO_MANY_GOAL * 100}% of requests: ${verdict(tooMany <= TOO_MANY_GOAL * report.requests)}`;
  return (
    `Goals, ${run.service.name}: wall / bound ${num(ratio, 3)} <= ${run.service.goal}: ${verdict(ratio <= run.service.goal)}; ` +
    `${tooManyGoal}${tooMany ? ` (${JSON.stringify(report.tooManyByReason)})` : ''}; zero double charges: ` +
    `${verdict(report.doubleCharges === 0 && report.chargedTwiceByKey === 0)}; polls that found the creation ` +
    `running at most ${RUNNING_POLLS_GOAL} per creation: ${verdict(report.meanRunningPollsPerCreation <= RUNNING_POLLS_GOAL)}. ` +
    `Mean generation time ${num(report.meanGenerationMs)} ms; catalog requests ${num(report.catalogRequests)}; ` +
    `answers on the wire ${JSON.stringify(report.statuses)} (0 = connection reset); ledger ${num(report.charges)} ` +
    `charges, ${num(report.refunds)} refunds, ${num(report.creations)} creations.`
  );
}

export const utilisation: Benchmark = {
  name: 'utilisation',
  async run(ctx: BenchContext) {
    const runs: CaseRun[] = [];
    for (const service of SERVICE_CASES) runs.push(await runCase(ctx, service, ctx.quick));
    const rate = RATE_LIMITED_SERVICE.requestsPerSecond;
    const { accountConcurrency } = QUOTA_BOUND_SERVICE;
    const table: Table = {
      title:
        `1. Rate-limit utilisation (${num(utilisationRows(ctx.quick))} rows per rate-bound case at ${rate} requests/s, ` +
        `${num(quotaBoundRows(ctx.quick))} in the concurrency-bound one; poll interval 1 s)`,
      headers: [...UTILISATION_HEADERS],
      rows: runs.map(caseRow),
      notes: [
        `Bound = (rows x 2 + the batch's catalog requests) / ${rate} requests/s: every row needs at least one ` +
          `submission and one poll (images come from another host, outside the rate), and GET /models counts ` +
          `against the same key. The former reference, a client polling every 1 s from acceptance (1 submission + ` +
          `ceil(g / 1 s) + 1 polls per row, g each creation's own generation time), is the column "polls at the interval". ` +
          `The concurrency-bound case's bound is rows x mean generation time / ${accountConcurrency}: each creation ` +
          `holds one of the account's ${accountConcurrency} slots while it generates; its rate is ` +
          `${QUOTA_BOUND_SERVICE.requestsPerSecond} requests/s and its worker has no task-queue limit.`,
        ...runs.map(goals),
        `Faults: ${Object.entries(RATE_LIMITED_SERVICE.faults)
          .map(([k, p]) => `${k} ${p * 100}%`)
          .join(', ')} of submissions in every case. Generation time = a fixed queue of a quarter of the shortest ` +
          `time, then running; "two models": the rows alternate between them.`,
        `Settings: worker \`IMAGEBATCH_RATE_LIMIT=${WORKER_RATE}\` (the Temporal server's task-queue limit), ` +
          `\`IMAGEGEN_MIN_POLL_INTERVAL_MS=1000\`, \`IMAGEGEN_POLL_PLAN=learn\` unless the case says \`interval\`, ` +
          `\`imagebatch run --concurrency ${UTILISATION_CONCURRENCY}\`.`,
      ],
    };
    const first = runs[0];
    const result: UtilisationResult | undefined = first && {
      rows: first.rows,
      seconds: first.seconds,
      report: first.report,
      succeeded: first.succeeded,
    };
    return { table, result };
  },
};
