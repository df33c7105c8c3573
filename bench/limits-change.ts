/**
 * 6. The window when limits change (issue #32): benchmark 1's two default-settings cases (no `--concurrency`, the
 * adaptive window) with the limit that binds changed when half the rows have ended: the key's rate halved in the
 * rate-bound case, the account's quota doubled in the quota-bound one. Sampled every second: the batch's rows in
 * flight and its window, the simulator's creations in flight, requests/s and 429s/s. How many seconds until the batch
 * settles near the new limit (the goal: 30)?
 *
 *   npm run bench -- --only limits            # both cases (about 15 minutes on 2 cores)
 *   npm run bench -- --only limits --quick    # a few rows: proves the script works, not the figures
 */
import path from 'node:path';
import { writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { LimitsSampler, type LimitsPoint } from './lib/limits-series';
import { Stack } from './lib/stack';
import type { LimitsCase, LimitsRun } from './limits-types';
import { aroundChangeTable, limitsSummaryRow, LIMITS_SUMMARY_HEADERS, writeLimitsPlot } from './lib/limits-report';
import {
  FOLLOW_GOAL_S,
  FOLLOW_HOLD_S,
  FOLLOW_SHARE,
  FOLLOW_SPAN_S,
  FOLLOW_TOO_MANY,
  LIMITS_AFTER_S,
  LIMITS_BEFORE_S,
  LIMITS_TAIL_SHARE,
} from './lib/follow';
import { num, type Table } from './lib/table';
import {
  caseConcurrency,
  caseStackOptions,
  QUOTA_BOUND_SERVICE,
  RATE_LIMITED_SERVICE,
  SERVICE_CASES,
  type CaseLimit,
} from './utilisation';

/** The rate-bound case's rate after the change, as a share of its rate before. */
export const RATE_CHANGE = 0.5;
/** The quota-bound case's quota after the change, as a multiple of its quota before. */
export const QUOTA_CHANGE = 2;
/** The change comes when this share of the batch's rows has ended (its progress query). */
export const CHANGE_AT_SHARE = 0.5;
/**
 * Rows per case. The quota-bound case has twice benchmark 1's 600, so that its second half, at twice the quota, still
 * lasts more than a minute; the rate-bound one has benchmark 1's 2,000.
 */
export const LIMITS_ROWS: Readonly<Record<CaseLimit, { full: number; quick: number }>> = {
  rate: { full: 2000, quick: 200 },
  concurrency: { full: 1200, quick: 100 },
};
/** How long a case may run before the bench gives up on it. */
const CASE_TIMEOUT_MS = 60 * 60_000;

/** The cases, from benchmark 1's default-settings ones. */
export function limitsCases(): LimitsCase[] {
  return SERVICE_CASES.filter((c) => c.defaults).map((service): LimitsCase => {
    const limit = service.binds ?? 'rate';
    switch (limit) {
      case 'rate': {
        const before = RATE_LIMITED_SERVICE.requestsPerSecond;
        const after = before * RATE_CHANGE;
        // The burst as the bench sets it (lib/settings.ts): a second's worth of the rate.
        return { service, limit, before, after, patch: { requestsPerSecond: after, burst: Math.max(1, after) } };
      }
      case 'concurrency': {
        const before = QUOTA_BOUND_SERVICE.accountConcurrency;
        const after = before * QUOTA_CHANGE;
        return { service, limit, before, after, patch: { accountConcurrency: after } };
      }
      default: {
        const never: never = limit;
        throw new Error(`unknown limit ${String(never)}`);
      }
    }
  });
}

/** Runs one case on a stack of its own, changing its limit once {@link CHANGE_AT_SHARE} of its rows have ended. */
export async function runLimitsCase(ctx: BenchContext, limitsCase: LimitsCase): Promise<LimitsRun> {
  const rows = ctx.quick ? LIMITS_ROWS[limitsCase.limit].quick : LIMITS_ROWS[limitsCase.limit].full;
  const stack = await Stack.start(caseStackOptions(limitsCase.service, 'limits'));
  try {
    const file = path.join(stack.dir, 'limits.csv');
    await writeBatchFile(file, rows, limitsCase.service.batchModels);
    ctx.log(`limits (${limitsCase.limit}): ${rows} rows, ${limitsCase.before} -> ${limitsCase.after} at half`);
    let change: LimitsRun['change'];
    const sampler = new LimitsSampler(stack, 'limits', async (point) => {
      if (change || point.rowsDone === undefined || point.rowsDone < rows * CHANGE_AT_SHARE) return;
      await stack.sim.setLimits(limitsCase.patch);
      change = { t: point.t, rowsDone: point.rowsDone };
      ctx.log(`limits (${limitsCase.limit}): changed at ${point.t.toFixed(1)} s, ${point.rowsDone} rows ended`);
    });
    const cli = stack.startRun(file, 'limits', caseConcurrency(limitsCase.service));
    sampler.start();
    let points: LimitsPoint[] = [];
    let run;
    try {
      run = await stack.finishRun(cli, CASE_TIMEOUT_MS);
    } finally {
      points = await sampler.stop();
    }
    ctx.log(`limits (${limitsCase.limit}): ${rows} rows in ${run.seconds.toFixed(1)} s`);
    return {
      limitsCase,
      rows,
      points,
      change,
      progress: run.progress,
      seconds: run.seconds,
      report: await stack.sim.report(),
    };
  } finally {
    await stack.close();
  }
}

export const limitsChange: Benchmark = {
  name: 'limits',
  async run(ctx: BenchContext) {
    const runs: LimitsRun[] = [];
    for (const limitsCase of limitsCases()) runs.push(await runLimitsCase(ctx, limitsCase));
    const plots = runs.map((run) => writeLimitsPlot(run, ctx.artifact(`limits-${run.limitsCase.limit}.svg`)));
    for (const plot of plots) ctx.log(`limits: plot written to ${plot}`);
    const table: Table = {
      title:
        `6. The window when limits change (default settings; the rate halved, the quota doubled once ` +
        `${CHANGE_AT_SHARE * 100}% of the rows had ended)`,
      headers: [...LIMITS_SUMMARY_HEADERS],
      rows: runs.map(limitsSummaryRow),
      notes: [
        `Follow time: seconds from the change to the end of the first ${FOLLOW_SPAN_S}-s span wholly after it from ` +
          `which every ${FOLLOW_SPAN_S}-s span for ${FOLLOW_HOLD_S} s shows, at a halved rate, requests/s at least ` +
          `${FOLLOW_SHARE * 100}% of the new rate with 429s under ${FOLLOW_TOO_MANY * 100}% of them, and, at a ` +
          `doubled quota, creations in flight (mean of the 1-s samples) at least ${FOLLOW_SHARE * 100}% of the new ` +
          `quota; "never" when no such span came before the batch ended. Goal (#32): at most ${FOLLOW_GOAL_S} s.`,
        `The window's own time: at a halved rate, the follow time of 429s alone (under ${FOLLOW_TOO_MANY * 100}% ` +
          `of requests, ${FOLLOW_SPAN_S}-s spans held ${FOLLOW_HOLD_S} s); at a doubled quota, the first sample ` +
          `whose window (the batch's progress) is at or above the new quota.`,
        `Before: the ${LIMITS_BEFORE_S} s before the change; after: ${LIMITS_AFTER_S[0]} to ${LIMITS_AFTER_S[1]} s ` +
          `after it (cut where ${LIMITS_TAIL_SHARE * 100}% of the rows had ended). Share: requests/s of the rate, ` +
          `or creations in flight of the quota.`,
        `Services: benchmark 1's (uniform 1-3 s, poll interval 1 s, 4% faults after the charge); rate-bound ` +
          `${RATE_LIMITED_SERVICE.requestsPerSecond} requests/s per key (burst the same, halved with it), ` +
          `${num(LIMITS_ROWS.rate[ctx.quick ? 'quick' : 'full'])} rows; quota-bound ` +
          `${QUOTA_BOUND_SERVICE.accountConcurrency} creations in flight at ${QUOTA_BOUND_SERVICE.requestsPerSecond} ` +
          `requests/s, ${num(LIMITS_ROWS.concurrency[ctx.quick ? 'quick' : 'full'])} rows. Worker at its defaults ` +
          `(no \`IMAGEBATCH_RATE_LIMIT\`, the default poll plan), \`IMAGEGEN_MIN_POLL_INTERVAL_MS=1000\`; ` +
          `\`imagebatch run\` without \`--concurrency\`.`,
        `Plots: ${plots.map((p) => `\`${p}\``).join(', ')}.`,
      ],
    };
    return { table, more: runs.map(aroundChangeTable) };
  },
};
