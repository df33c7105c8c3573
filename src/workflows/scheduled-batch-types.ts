import type { BatchProgress, ScheduleBudget, ScheduledRunOutcome } from '../model';
import type { BatchWorkflowInput } from './batch-input';

/** The input and result of a scheduled run, apart from its workflow so that both of its paths can name them. */
export interface ScheduledBatchWorkflowInput extends Omit<BatchWorkflowInput, 'batchId' | 'file' | 'outDir' | 'state'> {
  /** The schedule's id: runs are named after it. */
  scheduleId: string;
  /** A path the workers can read, or an http(s) URL, read afresh on every run. */
  source: string;
  /** The schedule's output folder; each run writes below it, in a folder named after its batch id. */
  outDir: string;
  /**
   * Leave out rows whose id succeeded in an earlier run of this schedule.
   * @default false
   */
  skipSucceeded?: boolean;
  /**
   * What the schedule's runs may spend together in a day or a month (patch `scheduled-run-budget`).
   * @default no budget
   */
  budget?: ScheduleBudget;
}

export interface ScheduledBatchResult {
  batchId: string;
  rows: number;
  skipped: number;
  /** The batch's last progress; absent when the run ended before its batch started (its budget spent). */
  progress?: BatchProgress;
  /** How the run ended (absent in runs from before patch `scheduled-run-ends`). */
  outcome?: ScheduledRunOutcome;
  /** Why it paused or stopped, when it did. */
  reason?: string;
}
