/**
 * The commands a batch sends its rows: start one (or adopt it when it exists already), resume, cancel, and the safety
 * net that reads back a row that closed without reporting. Workflow code; what they decide is {@link BatchRun}'s.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { ParentClosePolicy, getExternalWorkflowHandle, patched, sleep, startChild } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { legacyPromptWorkflowId, promptWorkflowId, type BatchRowInput, type RowRecord } from '../model';
import type { BatchWorkflowInput } from './batch-input';
import type { BatchRun } from './batch-run';
import { rowResumeSignal } from './definitions';
import { promptWorkflow } from './prompt-workflow';
import { ROW_CHECK_EVERY_MS } from './timeouts';

/**
 * Patch: a batch's canary proves the key too. It is started with `proveKey`: its key is sent a second time once the
 * first answer is known, and it passes only when the same creation came back (src/workflows/stop-loss.ts). Asked when a
 * canary row starts; a batch whose canary started before keeps today's canary.
 */
export const CANARY_PROVES_KEY = 'canary-proves-key';

export class BatchRows {
  /** The look-up of the unwatched rows in flight is due (its timer fired). */
  rowCheckDue = false;
  /** The timer of that look-up runs (one at a time). */
  private rowCheckArmed = false;

  /**
   * @param selfId the batch's workflow id, which its rows report to
   * @param shortRowIds whether the batch runs with patch `row-workflow-ids-fit-255`
   * @param lookupRow the activity that reads a row back from Temporal
   */
  constructor(
    private readonly input: BatchWorkflowInput,
    private readonly run: BatchRun,
    private readonly selfId: string,
    private readonly shortRowIds: boolean,
    private readonly lookupRow: Activities['lookupRow'],
  ) {}

  rowWorkflowId(rowId: string): string {
    const { batchId } = this.input;
    return this.shortRowIds ? promptWorkflowId(batchId, rowId) : legacyPromptWorkflowId(batchId, rowId);
  }

  async startRow(row: BatchRowInput): Promise<void> {
    const { input, run } = this;
    const workflowId = this.rowWorkflowId(row.rowId);
    const { price, proveKey } = run.rowStarting(row, () => patched(CANARY_PROVES_KEY));
    try {
      const child = await startChild(promptWorkflow, {
        workflowId,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // A row that has ended is never run again under the same batch id: a re-run resumes, it does not repay.
        // Only a row whose workflow failed, was cancelled or was terminated may start again.
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        memo: { batchId: input.batchId, rowId: row.rowId },
        args: [
          {
            batchId: input.batchId,
            rowId: row.rowId,
            line: row.line,
            request: row.request,
            ...(price ? { price } : {}),
            outDir: input.outDir,
            parentWorkflowId: this.selfId,
            ...(input.maxAttempts === undefined ? {} : { maxAttempts: input.maxAttempts }),
            ...(input.maxPollWaitMs === undefined ? {} : { maxPollWaitMs: input.maxPollWaitMs }),
            ...(input.rowCheckEveryMs === undefined ? {} : { batchCheckEveryMs: input.rowCheckEveryMs }),
            ...(input.ledger ? { ledger: input.ledger } : {}),
            ...(proveKey ? { proveKey: true as const } : {}),
          },
        ],
      });
      // The row reports before it closes; its close is only the safety net.
      void child.result().then(
        (record) => this.settleSilentRow(row.rowId, record),
        () => this.settleSilentRow(row.rowId),
      );
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // The batch was started again over a row that exists already: a closed row is counted from its record; a
      // running one is adopted (it reports to this run) and resumed, in case it waits on a stop of the old run.
      const found = await this.lookupRow({ workflowId });
      if (found.status === 'closed') {
        run.rowEnded(found.record);
        return;
      }
      run.unwatched.add(row.rowId);
      if (run.state.cancelling) return;
      await this.resumeRow(row.rowId);
    }
  }

  /** Handles a resume request: clears the pause and the stop, and lets the rows that waited carry on. */
  async applyResume(): Promise<void> {
    const blocked = this.run.takeResume();
    if (!blocked) return;
    await Promise.all(blocked.map((rowId) => this.resumeRow(rowId)));
  }

  async resumeRow(rowId: string): Promise<void> {
    await getExternalWorkflowHandle(this.rowWorkflowId(rowId))
      .signal(rowResumeSignal)
      .catch(() => undefined);
  }

  /** Asks every row in flight not asked yet to cancel; each ends `cancelled` and reports its record. */
  async cancelRowsInFlight(): Promise<void> {
    const rowIds = this.run.takeRowsToCancel();
    await Promise.all(
      rowIds.map((rowId) =>
        getExternalWorkflowHandle(this.rowWorkflowId(rowId))
          .cancel()
          .catch(() => undefined),
      ),
    );
  }

  /**
   * The safety net: a row in flight closed and its report did not come first. Its record is its result, or, when
   * it closed without one (terminated), what Temporal keeps of it; a row that completed has already reported,
   * and counting is idempotent.
   */
  async settleSilentRow(rowId: string, result?: RowRecord): Promise<void> {
    const { run } = this;
    if (!(rowId in run.state.inFlight)) return;
    const lookup = result
      ? { status: 'closed' as const, record: result }
      : await this.lookupRow({ workflowId: this.rowWorkflowId(rowId) });
    if (lookup.status === 'closed') {
      run.unwatched.delete(rowId);
      run.rowEnded(lookup.record);
    }
  }

  /** Starts the timer of the next look-up of the unwatched rows in flight, if there are any (one timer at a time). */
  armRowCheck(): void {
    if (this.rowCheckArmed || this.run.unwatchedInFlight().length === 0) return;
    this.rowCheckArmed = true;
    void sleep(this.input.rowCheckEveryMs ?? ROW_CHECK_EVERY_MS).then(
      () => {
        this.rowCheckArmed = false;
        this.rowCheckDue = true;
      },
      () => undefined,
    );
  }

  /** Asks after every unwatched row in flight; those that closed are counted from their records. */
  async checkUnwatchedRows(): Promise<void> {
    this.rowCheckDue = false;
    await Promise.all(this.run.unwatchedInFlight().map((rowId) => this.settleSilentRow(rowId)));
  }
}
