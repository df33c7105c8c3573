/**
 * How fast a batch follows a change of the service's limits, from the samples of ./limits-series.ts: figures over a
 * span of seconds, and the "follow time", the seconds from the change until a rule holds and keeps holding.
 */
import type { LimitsPoint } from './limits-series';

/** The span (s) each figure is taken over: requests/s, 429 share and mean creations in flight. */
export const FOLLOW_SPAN_S = 5;
/** How long (s) the rule must keep holding, span after span, for the batch to count as settled. */
export const FOLLOW_HOLD_S = 10;
/** Settled near a new limit: at least this share of it (requests/s of the rate, creations in flight of the quota). */
export const FOLLOW_SHARE = 0.9;
/** Settled under a new rate: 429s under this share of the requests. */
export const FOLLOW_TOO_MANY = 0.01;
/** The goal of issue #32: the window follows within this many seconds. */
export const FOLLOW_GOAL_S = 30;

/** The summary's spans (s): the last this many before the change, and from the first to the second after it. */
export const LIMITS_BEFORE_S = 30;
export const LIMITS_AFTER_S = [30, 90] as const;
/** The span after the change ends where this share of the rows had ended: the batch's tail has fewer rows to start. */
export const LIMITS_TAIL_SHARE = 0.95;

/** What a span of samples shows. */
export interface SpanFigures {
  /** The span's end (s). */
  t: number;
  requestsPerSecond: number;
  tooManyPerSecond: number;
  /** 429s / requests over the span (0 without requests). */
  tooManyShare: number;
  /** Mean of the samples in the span. */
  creationsInFlight: number;
  /** Means of the batch's figures over the span (undefined when none was known). */
  rowsInFlight: number | undefined;
  window: number | undefined;
}

function mean(values: ReadonlyArray<number | undefined>): number | undefined {
  const known = values.filter((v): v is number => v !== undefined);
  return known.length ? known.reduce((a, b) => a + b, 0) / known.length : undefined;
}

/**
 * The figures of the samples after `from` (s) up to and including `to` (counted from the last sample at or before
 * `from`, or the first sample when none is), or undefined with fewer than two samples.
 */
export function spanFigures(points: readonly LimitsPoint[], from: number, to: number): SpanFigures | undefined {
  const first = [...points].reverse().find((p) => p.t <= from) ?? points[0];
  const inside = points.filter((p) => p.t > Math.max(from, first?.t ?? from) && p.t <= to);
  const last = inside.at(-1);
  if (!first || !last || last.t <= first.t) return undefined;
  const seconds = last.t - first.t;
  const requests = last.requests - first.requests;
  const tooMany = last.tooMany - first.tooMany;
  return {
    t: last.t,
    requestsPerSecond: requests / seconds,
    tooManyPerSecond: tooMany / seconds,
    tooManyShare: requests ? tooMany / requests : 0,
    creationsInFlight: mean(inside.map((p) => p.creationsInFlight)) ?? 0,
    rowsInFlight: mean(inside.map((p) => p.rowsInFlight)),
    window: mean(inside.map((p) => p.window)),
  };
}

/**
 * Seconds from the change (at `changeT`) to the end of the first {@link FOLLOW_SPAN_S}-s span, wholly after the
 * change, from which `settled` holds for every such span ending in the next {@link FOLLOW_HOLD_S} s; undefined when
 * it never does before the samples end.
 */
export function followSeconds(
  points: readonly LimitsPoint[],
  changeT: number,
  settled: (span: SpanFigures) => boolean,
): number | undefined {
  const ends = points.filter((p) => p.t >= changeT + FOLLOW_SPAN_S).map((p) => p.t);
  const holds = (end: number) => {
    const span = spanFigures(points, end - FOLLOW_SPAN_S, end);
    return span !== undefined && settled(span);
  };
  const lastT = points.at(-1)?.t ?? 0;
  for (const end of ends) {
    if (end + FOLLOW_HOLD_S > lastT) return undefined;
    if (ends.filter((e) => e >= end && e <= end + FOLLOW_HOLD_S).every(holds)) return end - changeT;
  }
  return undefined;
}

/** Seconds from the change to the first sample at or after it for which `reached` holds, or undefined. */
export function firstSeconds(
  points: readonly LimitsPoint[],
  changeT: number,
  reached: (point: LimitsPoint) => boolean,
): number | undefined {
  const hit = points.find((p) => p.t >= changeT && reached(p));
  return hit && hit.t - changeT;
}
