/**
 * The tables and plots of benchmark 6 (../limits-change.ts): per case, the seconds around the change, its summary row
 * (before and after, the follow time and its verdict), and an SVG of rows in flight and requests/s over time.
 */
import { writeFileSync } from 'node:fs';
import type { LimitsRun } from '../limits-types';
import {
  firstSeconds,
  FOLLOW_GOAL_S,
  FOLLOW_SHARE,
  FOLLOW_SPAN_S,
  FOLLOW_TOO_MANY,
  followSeconds,
  LIMITS_AFTER_S,
  LIMITS_BEFORE_S,
  LIMITS_TAIL_SHARE,
  spanFigures,
  type SpanFigures,
} from './follow';
import type { LimitsPoint } from './limits-series';
import { svgChart } from './plot';
import { num, verdict, type Cell, type Table } from './table';

/** Seconds from the change at which the table around it shows a row (the sample nearest to each). */
export const AROUND_OFFSETS_S = [-10, -5, 0, 5, 10, 15, 20, 25, 30, 40, 50, 60, 90, 120] as const;

/** The plot's width (px): its legend has five lines. */
const PLOT_WIDTH = 1100;

/** What a case's follow comes to. */
export interface FollowResult {
  /** By the rule (see the benchmark's notes); undefined: never settled. */
  followS: number | undefined;
  /** The window's own time: 429s settled (rate), or the window at the new quota (quota). */
  windowS: number | undefined;
  met: boolean;
}

/** The follow time of a run, and the window's own. */
export function followOf(run: LimitsRun): FollowResult {
  const { change, points, limitsCase } = run;
  if (!change) return { followS: undefined, windowS: undefined, met: false };
  const { after } = limitsCase;
  let followS: number | undefined;
  let windowS: number | undefined;
  switch (limitsCase.limit) {
    case 'rate':
      followS = followSeconds(
        points,
        change.t,
        (s) => s.requestsPerSecond >= FOLLOW_SHARE * after && s.tooManyShare < FOLLOW_TOO_MANY,
      );
      windowS = followSeconds(points, change.t, (s) => s.requestsPerSecond > 0 && s.tooManyShare < FOLLOW_TOO_MANY);
      break;
    case 'concurrency':
      followS = followSeconds(points, change.t, (s) => s.creationsInFlight >= FOLLOW_SHARE * after);
      windowS = firstSeconds(points, change.t, (p) => (p.window ?? 0) >= after);
      break;
    default: {
      const never: never = limitsCase.limit;
      throw new Error(`unknown limit ${String(never)}`);
    }
  }
  return { followS, windowS, met: followS !== undefined && followS <= FOLLOW_GOAL_S };
}

/** The summary's spans of a run: before the change, and after it (cut where the batch's tail begins). */
function beforeAfter(run: LimitsRun): { before?: SpanFigures; after?: SpanFigures } {
  const { change, points } = run;
  if (!change) return {};
  const tail = points.find((p) => (p.rowsDone ?? 0) >= LIMITS_TAIL_SHARE * run.rows)?.t ?? Infinity;
  const afterEnd = Math.min(change.t + LIMITS_AFTER_S[1], tail);
  const before = spanFigures(points, change.t - LIMITS_BEFORE_S, change.t);
  const after = spanFigures(points, change.t + LIMITS_AFTER_S[0], afterEnd);
  return { ...(before ? { before } : {}), ...(after ? { after } : {}) };
}

export const LIMITS_SUMMARY_HEADERS = [
  'case',
  'limit before → after',
  'rows ok',
  'wall s',
  'change at s (rows ended)',
  'requests/s before → after',
  '429s before → after',
  'creations in flight before → after',
  'window before → after',
  'share of the limit before → after',
  'follow time s',
  "the window's own time s",
  `goal: follows within ${FOLLOW_GOAL_S} s`,
] as const;

const pair = (a: number | undefined, b: number | undefined, digits = 1, suffix = '') => {
  const one = (v: number | undefined) => (v === undefined ? 'n/a' : `${num(v, digits)}${suffix}`);
  return `${one(a)} → ${one(b)}`;
};
const percent = (share: number | undefined) => (share === undefined ? undefined : share * 100);
const seconds = (s: number | undefined) => (s === undefined ? 'never' : num(s, 0));

/** A run's share of its limit in a span: requests/s of the rate, or creations in flight of the quota. */
function shareOf(run: LimitsRun, span: SpanFigures | undefined, limit: number): number | undefined {
  if (!span) return undefined;
  return (run.limitsCase.limit === 'rate' ? span.requestsPerSecond : span.creationsInFlight) / limit;
}

/** A run's row of the summary, under {@link LIMITS_SUMMARY_HEADERS}. */
export function limitsSummaryRow(run: LimitsRun): Cell[] {
  const { limitsCase, change } = run;
  const { before, after } = beforeAfter(run);
  const follow = followOf(run);
  const unit = limitsCase.limit === 'rate' ? 'requests/s' : 'in flight';
  return [
    limitsCase.service.name,
    `${limitsCase.limit} ${num(limitsCase.before)} → ${num(limitsCase.after)} ${unit}`,
    `${num(run.progress.counts.succeeded)} / ${num(run.rows)}`,
    num(run.seconds, 1),
    change ? `${num(change.t, 0)} (${num(change.rowsDone)})` : 'no change (ended first)',
    pair(before?.requestsPerSecond, after?.requestsPerSecond),
    pair(percent(before?.tooManyShare), percent(after?.tooManyShare), 2, '%'),
    pair(before?.creationsInFlight, after?.creationsInFlight),
    pair(before?.window, after?.window),
    pair(percent(shareOf(run, before, limitsCase.before)), percent(shareOf(run, after, limitsCase.after)), 0, '%'),
    seconds(follow.followS),
    seconds(follow.windowS),
    verdict(follow.met),
  ];
}

/** The point nearest to `t`, if one lies within a sample and a half. */
function nearest(points: readonly LimitsPoint[], t: number): LimitsPoint | undefined {
  const best = points.reduce<LimitsPoint | undefined>(
    (b, p) => (b === undefined || Math.abs(p.t - t) < Math.abs(b.t - t) ? p : b),
    undefined,
  );
  return best && Math.abs(best.t - t) <= 1.5 ? best : undefined;
}

/** The seconds around a run's change, one row per {@link AROUND_OFFSETS_S}. */
export function aroundChangeTable(run: LimitsRun): Table {
  const { change, points, limitsCase, report } = run;
  const rows: Cell[][] = [];
  for (const offset of change ? AROUND_OFFSETS_S : []) {
    const p = nearest(points, change!.t + offset);
    if (!p || (rows.length && rows.at(-1)?.[1] === num(p.t, 0))) continue;
    const span = spanFigures(points, p.t - FOLLOW_SPAN_S, p.t);
    rows.push([
      offset,
      num(p.t, 0),
      p.rowsDone === undefined ? '' : num(p.rowsDone),
      p.rowsInFlight === undefined ? '' : num(p.rowsInFlight),
      p.window === undefined ? '' : `${num(p.window)}${p.boundBy ? ` (${p.boundBy})` : ''}`,
      num(p.creationsInFlight),
      span ? num(span.requestsPerSecond, 1) : '',
      span ? num(span.tooManyPerSecond, 1) : '',
    ]);
  }
  const tooMany = report.statuses['429'] ?? 0;
  return {
    title:
      `6, ${limitsCase.service.name}: ${limitsCase.limit} ${num(limitsCase.before)} → ${num(limitsCase.after)}` +
      (change ? ` at ${num(change.t, 0)} s` : ' (no change: the batch ended first)'),
    headers: [
      's from the change',
      'elapsed s',
      'rows ended',
      'batch rows in flight',
      'window (bound by)',
      'creations in flight (simulator)',
      `requests/s (${FOLLOW_SPAN_S} s)`,
      `429s/s (${FOLLOW_SPAN_S} s)`,
    ],
    rows,
    notes: [
      `Whole run: ${num(report.requests)} requests, ${num(tooMany)} 429s ${JSON.stringify(report.tooManyByReason)}, ` +
        `${num(report.doubleCharges)} double charges; rows ${JSON.stringify(run.progress.counts)}.`,
    ],
  };
}

/** Draws a run: rows in flight (left axis), requests/s and 429s/s (right axis), the change marked. Returns `file`. */
export function writeLimitsPlot(run: LimitsRun, file: string): string {
  const { change, points, limitsCase } = run;
  const spans = points.map((p) => spanFigures(points, p.t - FOLLOW_SPAN_S, p.t));
  const known = (f: (p: LimitsPoint) => number | undefined) =>
    points.flatMap((p) => {
      const v = f(p);
      return v === undefined ? [] : [[p.t, v] as const];
    });
  const perSpan = (f: (s: SpanFigures) => number) =>
    points.flatMap((p, i) => {
      const s = spans[i];
      return s ? [[p.t, f(s)] as const] : [];
    });
  const quota = limitsCase.limit === 'concurrency';
  const marks = (unit: string) => [
    { y: limitsCase.before, label: `before: ${num(limitsCase.before)} ${unit}` },
    { y: limitsCase.after, label: `after: ${num(limitsCase.after)} ${unit}` },
  ];
  writeFileSync(
    file,
    svgChart({
      width: PLOT_WIDTH,
      title: `${limitsCase.service.name}: ${limitsCase.limit} ${limitsCase.before} → ${limitsCase.after}`,
      xLabel: 'elapsed time (s)',
      leftLabel: 'rows / creations in flight',
      rightLabel: `per second (${FOLLOW_SPAN_S}-s spans)`,
      ...(quota ? { leftMarks: marks('in flight (quota)') } : { rightMarks: marks('requests/s (rate)') }),
      xMarks: change ? [{ x: change.t, label: `${limitsCase.limit} changed` }] : [],
      lines: [
        { name: 'batch rows in flight', color: '#1f77b4', points: known((p) => p.rowsInFlight) },
        { name: 'window', color: '#2ca02c', points: known((p) => p.window) },
        { name: 'creations in flight', color: '#9467bd', points: known((p) => p.creationsInFlight) },
        {
          name: 'requests/s',
          color: '#ff7f0e',
          axis: 'right',
          dashed: true,
          points: perSpan((s) => s.requestsPerSecond),
        },
        { name: '429s/s', color: '#d62728', axis: 'right', dashed: true, points: perSpan((s) => s.tooManyPerSecond) },
      ],
    }),
  );
  return file;
}
