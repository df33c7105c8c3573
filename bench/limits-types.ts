/**
 * The types of benchmark 6 (bench/limits-change.ts), apart, so that its report (lib/limits-report.ts) does not import
 * the benchmark that imports it.
 */
import type { BatchProgress } from '../src/model';
import type { LimitsPatch } from '../src/simulator';
import type { LimitsPoint } from './lib/limits-series';
import type { SimHostReport } from './lib/sim-protocol';
import type { CaseLimit, ServiceCase } from './utilisation';

/** One case: a default-settings service of benchmark 1, and the change of its binding limit. */
export interface LimitsCase {
  service: ServiceCase;
  limit: CaseLimit;
  /** The limit's value before and after (requests/s, or creations in flight). */
  before: number;
  after: number;
  patch: LimitsPatch;
}

/** What one case gave. */
export interface LimitsRun {
  limitsCase: LimitsCase;
  rows: number;
  points: LimitsPoint[];
  /** When the limits changed (s since sampling started), and the rows ended by then; undefined if never. */
  change: { t: number; rowsDone: number } | undefined;
  progress: BatchProgress;
  seconds: number;
  report: SimHostReport;
}
