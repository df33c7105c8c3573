/** How a scheduled run ended, and the line each run leaves in its schedule's index of runs. */
import type { BatchProgress, WaitReason } from './progress';
import { RowState, roundUsd } from './record';

/** How a run of a schedule ended. */
export const ScheduledRunOutcome = {
  /** Its batch ran to its end (each row's own state is in its results). */
  Completed: 'completed',
  /** It could not start (its file missing, unreadable or invalid), or its batch failed. */
  Failed: 'failed',
  /** Its batch paused (its spend cap, or a person): the run ended there, its rows not started `not_run`. */
  Paused: 'paused',
  /** The service stopped its batch (key, balance, budget) or a stop-loss breaker did: the run ended there. */
  Stopped: 'stopped',
  /** It was cancelled (a person, or the schedule's `cancel_other` overlap policy). */
  Cancelled: 'cancelled',
  /**
   * It was terminated (the `terminate_other` overlap policy, or a person): it ran no more code, so the next run of
   * the schedule to end writes its results and its line.
   */
  Terminated: 'terminated',
} as const;
export type ScheduledRunOutcome = (typeof ScheduledRunOutcome)[keyof typeof ScheduledRunOutcome];

/** The failure type of a scheduled run that cannot start: its file is missing, unreadable or invalid. */
export const SCHEDULED_RUN_CANNOT_START = 'ScheduledRun.CannotStart';

/** The file, in a schedule's output folder, that lists its runs as they end: one JSON object a line. */
export const SCHEDULE_RUNS_INDEX = 'runs.jsonl';

/** One line of {@link SCHEDULE_RUNS_INDEX}: a run that ended. */
export interface ScheduledRunEntry {
  /** The run's batch id (its folder's name). */
  runId: string;
  outcome: ScheduledRunOutcome;
  /** Why it failed, paused or stopped, when it did. */
  reason?: string;
  /** Rows the run was to send (after those left out). */
  rows: number;
  succeeded: number;
  /** Rows that ended without images: failed, unknown, images unsaved or cancelled. */
  failed: number;
  /** Rows never started (the run ended first). */
  notRun: number;
  /** Rows left out because an earlier run may have paid for them (`--each-run new`); absent when not known. */
  skipped?: number;
  /** Net spend known (USD): at least this; absent when nothing of it is known (a terminated run's batch unread). */
  spentUsd?: number;
  /** Rows that ended whose spend is not known: on top of `spentUsd`. */
  unknownSpendRows?: number;
  /** ISO times, workflow time. */
  startedAt: string;
  endedAt: string;
  /** The run's results.csv, as the worker saw it; absent when it could not be written. */
  resultsCsv?: string;
}

/** The holds of a batch that only a person can lift, and the run's outcome when it ends on one. */
export function holdOutcome(
  waiting: WaitReason | undefined,
): typeof ScheduledRunOutcome.Paused | typeof ScheduledRunOutcome.Stopped | undefined {
  switch (waiting?.kind) {
    case 'paused':
    case 'spend_cap':
    case 'price_unknown':
      return ScheduledRunOutcome.Paused;
    case 'batch_stop':
    case 'stop_loss':
      return ScheduledRunOutcome.Stopped;
    case 'window_full':
    case 'price_unconfirmed':
    case 'canary':
    case 'reading':
    case undefined:
      return undefined;
  }
}

/** Why a held batch waits, in a few words, for a run's index line (empty for a wait that is no hold). */
export function holdText(waiting: WaitReason | undefined): string {
  switch (waiting?.kind) {
    case 'paused':
      return waiting.reason;
    case 'spend_cap':
      return `spend cap of ${waiting.capUsd} USD reached`;
    case 'price_unknown':
      return `spend cap of ${waiting.capUsd} USD: no price known for ${waiting.models.join(', ')}`;
    case 'batch_stop':
      return `the service stopped the batch: HTTP ${waiting.details.httpStatus} ${waiting.details.reason}: ${waiting.details.message}`;
    case 'stop_loss':
      return `stop-loss ${waiting.trip.breaker}: ${waiting.trip.message}`;
    case 'window_full':
    case 'price_unconfirmed':
    case 'canary':
    case 'reading':
    case undefined:
      return '';
  }
}

/**
 * Whether a scheduled run should end its batch now: the batch is held by something only a person lifts, and no
 * row is running on (a paused batch's rows in flight finish first; a stopped batch's rows wait on the stop, so
 * they are ended with it).
 */
export function runShouldEnd(progress: BatchProgress): boolean {
  const outcome = holdOutcome(progress.waiting);
  if (outcome === undefined || progress.done) return false;
  return outcome === ScheduledRunOutcome.Stopped || progress.inFlight === 0;
}

/** A batch held for good, as the run's watch tells its run. */
export interface RunHold {
  hold: typeof ScheduledRunOutcome.Paused | typeof ScheduledRunOutcome.Stopped;
  /** Why, in a few words ({@link holdText}). */
  reason: string;
  /** Held by its spend cap: the run says so when the cap was what was left of the schedule's budget. */
  byCap: boolean;
}

/** The hold a scheduled run ends on, once its batch is held for good ({@link runShouldEnd}); else undefined. */
export function runHold(progress: BatchProgress): RunHold | undefined {
  const hold = runShouldEnd(progress) ? holdOutcome(progress.waiting) : undefined;
  if (hold === undefined) return undefined;
  return { hold, reason: holdText(progress.waiting), byCap: progress.waiting?.kind === 'spend_cap' };
}

/** The counts of a run's index line, from its batch's last progress. */
export function runCounts(progress: BatchProgress): Pick<ScheduledRunEntry, 'succeeded' | 'failed' | 'notRun'> {
  const c = progress.counts;
  return {
    succeeded: c[RowState.Succeeded] + c[RowState.Reused],
    failed: c[RowState.Failed] + c[RowState.Unknown] + c[RowState.ImagesUnsaved] + c[RowState.Cancelled],
    notRun: c[RowState.NotRun],
  };
}

/** What a schedule's runs may spend together, in a day or a month of its time zone. */
export interface ScheduleBudget {
  /** Most its runs spend in one day (USD). @default no budget per day */
  perDayUsd?: number;
  /** Most its runs spend in one calendar month (USD). @default no budget per month */
  perMonthUsd?: number;
  /** The IANA time zone the day and the month are read in: the schedule's. @default 'UTC' */
  timezone?: string;
}

/** What the runs of a schedule spent in the day and the month a run starts in. */
export interface BudgetSpent {
  dayUsd: number;
  monthUsd: number;
  /** Keys that may hold money and whose cost no one knows (no cost shown, no list price recorded). */
  unknownKeys: number;
}

/** A run's check of its schedule's budget: what is left of it (the run's spend cap), or why nothing is. */
export type BudgetCheck = { leftUsd: number; spent: BudgetSpent } | { leftUsd: 0; spent: BudgetSpent; reason: string };

/**
 * What is left of `budget` after `spent`: the least of what is left of the day's and the month's. Nothing is left
 * when a key's cost is unknown: the budget could not be kept.
 */
export function budgetLeft(budget: ScheduleBudget, spent: BudgetSpent): BudgetCheck {
  const zone = budget.timezone ?? 'UTC';
  if (spent.unknownKeys > 0) {
    const keys = `${spent.unknownKeys} key${spent.unknownKeys === 1 ? '' : 's'}`;
    return {
      leftUsd: 0,
      spent,
      reason: `the schedule's budget: ${keys} of this period may hold money of unknown cost`,
    };
  }
  const limits = [
    ...(budget.perDayUsd === undefined ? [] : [{ what: 'day', of: budget.perDayUsd, spent: spent.dayUsd }]),
    ...(budget.perMonthUsd === undefined ? [] : [{ what: 'month', of: budget.perMonthUsd, spent: spent.monthUsd }]),
  ];
  let left = Infinity;
  for (const limit of limits) {
    const rest = roundUsd(limit.of - limit.spent);
    if (rest <= 0) {
      const reason = `the schedule's budget of ${limit.of} USD a ${limit.what} (${zone}) is spent: ${roundUsd(limit.spent)} USD`;
      return { leftUsd: 0, spent, reason };
    }
    left = Math.min(left, rest);
  }
  return { leftUsd: left, spent };
}
