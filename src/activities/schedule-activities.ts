import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Dispatcher } from 'undici';
import { msToNumber } from '@temporalio/common/lib/time';
import { eachRow, fileFingerprint, rowMayBePaid } from '../ledger';
import { BatchFileError, BatchFileErrorReason } from '../batch';
import { prepareScheduledInput, type PreparedInput, type ScheduleLedger } from '../schedules/prepare';
import { CannotStartReason, ScheduledRunCannotStartError, type SourceCheckOptions } from '../schedules/source-check';
import { refusalOf } from '../api/download-guard';
import { ErrorCode } from '../model/errors';
import {
  checkSourcePath,
  redactedReason,
  ScheduleSourceRefusedError,
  sourceRefusal,
  type SourceFolders,
} from './schedule-source';
import { scheduleSpend } from '../schedules/budget';
import { scheduledRunCannotStart } from './failures';
import {
  CREATE_IMAGE_START_TO_CLOSE,
  budgetLeft,
  promptWorkflowId,
  type BudgetCheck,
  type ScheduleBudget,
} from '../model';
import { whileHeartbeating } from './heartbeat';
import { describeOrNot } from './scheduled-run-sweep';

export interface PrepareScheduledRunInput {
  source: string;
  /** The schedule's output folder (as the worker sees it); each run gets a folder of its own below it. */
  outDir: string;
  batchId: string;
  skipSucceeded: boolean;
  defaultModel?: string;
  /**
   * Check the file as `imagebatch run` would, with the schedule's columns, before anything starts.
   * @default not checked (runs of workflows from before patch `scheduled-run-ends`)
   */
  check?: SourceCheckOptions;
  /**
   * The schedule's budget: the run is told what is left of it (its spend cap), from what every run of the schedule
   * spent this day and month.
   * @default no budget
   */
  budget?: ScheduleBudget;
}

/** A prepared run, and what is left of its schedule's budget when it has one. */
export interface PreparedRun extends PreparedInput {
  budget?: BudgetCheck;
}

/**
 * How long after its workflow closed a row of another run counts as over for good: three attempts of `createImage`
 * (an attempt of a closed workflow may still run until its start-to-close timeout), so a claim it holds with nothing
 * paid can be given back.
 */
export const ROW_SETTLED_AFTER_MS = 3 * msToNumber(CREATE_IMAGE_START_TO_CLOSE);

/**
 * Activities of scheduled runs: make a run's input (reading what every earlier run may have paid for from their
 * ledgers), and a no-op left for the workflows that still call it. Both heartbeat while they work.
 */
export function createScheduleActivities(deps: {
  outputRoot: string;
  temporalClient?: Client;
  now?: () => number;
  ledger: ScheduleLedger;
  /**
   * What a URL source is fetched through: the guarded dispatcher of image downloads (src/api/download-guard.ts).
   * @default undici's global dispatcher (tests only: the worker always gives the guarded one)
   */
  sourceDispatcher?: Dispatcher;
  /**
   * Where a local source may be besides the schedule's output folder (`IMAGEBATCH_SCHEDULE_SOURCES`), and the files
   * of the secret settings it may never be.
   * @default only the schedule's output folder
   */
  sourceFolders?: Omit<SourceFolders, 'scheduleDir'>;
}) {
  const now = deps.now ?? Date.now;
  return {
    async prepareScheduledRun(input: PrepareScheduledRunInput): Promise<PreparedRun> {
      const ctx = Context.current();
      const outDir = path.resolve(deps.outputRoot, input.outDir);
      const client = deps.temporalClient;
      const url = /^https?:\/\//i.test(input.source);
      const source = url ? input.source : path.resolve(deps.outputRoot, input.source);
      const folders = { scheduleDir: outDir, allowed: [], secretFiles: [], ...deps.sourceFolders };
      // A local file is read only where the deployment allows it, and never a secret's file.
      const checked = url ? Promise.resolve() : checkSourcePath(source, folders);
      const prepared = checked.then(() =>
        prepareScheduledInput(
          {
            source,
            runDir: path.join(outDir, input.batchId),
            batchId: input.batchId,
            skipSucceeded: input.skipSucceeded,
            ledger: deps.ledger,
            ...(client
              ? { rowSettled: (batchId: string, rowId: string) => rowSettled(client, batchId, rowId, now()) }
              : {}),
            ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
            ...(input.check ? { check: input.check } : {}),
          },
          deps.sourceDispatcher,
        ),
      );
      const run = await whileHeartbeating(ctx, prepared).catch((err: unknown) => cannotStart(err, input.source));
      // The run is a batch of its own in the store: `results` finds its file and folder there for as long as it lasts.
      await deps.ledger.store.append([
        {
          type: 'batch',
          batchId: input.batchId,
          file: run.file,
          fingerprint: await fileFingerprint(run.file),
          outDir: path.join(outDir, input.batchId),
          ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
          newImages: !input.skipSucceeded,
        },
      ]);
      if (!input.budget) return run;
      const zone = input.budget.timezone ?? 'UTC';
      const spent = await whileHeartbeating(ctx, scheduleSpend(outDir, deps.ledger.store, now(), zone));
      return { ...run, budget: budgetLeft(input.budget, spent) };
    },

    /**
     * Formerly appended the ids of the rows of `batchId` that succeeded to `succeeded-ids.txt`, once the run's batch
     * had returned. The runs' ledgers, written row by row as rows end, are the record now (a run cancelled,
     * terminated or failed before this point left its record all the same), so this writes nothing: it returns how
     * many rows of the run its ledger says may have been paid for. Kept because `scheduledBatchWorkflow` calls it.
     */
    async recordSucceededRows(input: { outDir: string; batchId: string; file: string }): Promise<number> {
      const count = async () => {
        let paid = 0;
        for await (const row of eachRow(deps.ledger.store, input.batchId)) if (rowMayBePaid(row)) paid += 1;
        return paid;
      };
      return whileHeartbeating(Context.current(), count());
    },
  };
}

/**
 * A source that is missing, unreadable or invalid fails the run at once (non-retryable): retried, it held the run,
 * and under the `skip` overlap policy every later tick, for the retry policy's 20 minutes. So does a URL whose
 * address (or a redirect's) the download guard refused: nothing was read.
 */
function cannotStart(err: unknown, source: string): never {
  if (err instanceof ScheduleSourceRefusedError) {
    throw scheduledRunCannotStart(err.message, { code: err.code, reason: CannotStartReason.Refused });
  }
  const refused = refusalOf(err);
  if (refused) {
    throw scheduledRunCannotStart(sourceRefusal(source, refused), {
      code: ErrorCode.ScheduleSourceRefused,
      reason: CannotStartReason.Refused,
    });
  }
  if (err instanceof ScheduledRunCannotStartError) {
    throw scheduledRunCannotStart(redactedReason(err.message), { code: err.code, reason: err.reason });
  }
  if (err instanceof BatchFileError && err.reason === BatchFileErrorReason.Unreadable) {
    throw scheduledRunCannotStart(redactedReason(err.message), { code: err.code, reason: err.reason });
  }
  throw err;
}

/** Whether row `rowId` of run `batchId` is over for good: its workflow closed long ago, or Temporal forgot it. */
async function rowSettled(client: Client, batchId: string, rowId: string, nowMs: number): Promise<boolean> {
  const row = await describeOrNot(client, promptWorkflowId(batchId, rowId));
  if (!row) return true;
  if (row.status.name === 'RUNNING' || !row.closeTime) return false;
  return nowMs - row.closeTime.getTime() > ROW_SETTLED_AFTER_MS;
}
