import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  batchWorkflowId,
  holdOutcome,
  holdText,
  runCounts,
  runShouldEnd,
  QueryName,
  SCHEDULE_RUNS_INDEX,
  type BatchProgress,
  type RunResultsWriter,
  type ScheduledRunEntry,
  type ScheduledRunOutcome,
} from '../model';
import type { Logger } from '../api/client';
import { whileHeartbeating } from './heartbeat';

/** How often a scheduled run asks its batch's progress while it runs. */
export const RUN_WATCH_EVERY_MS = 5_000;

/** What a scheduled run's watch saw: its batch held by something only a person lifts, or its batch closed. */
export type RunWatch =
  { hold: typeof ScheduledRunOutcome.Paused | typeof ScheduledRunOutcome.Stopped; reason: string } | { closed: true };

export interface RecordScheduledRunInput {
  /** The schedule's output folder (as the worker sees it); the run's folder is below it. */
  outDir: string;
  runId: string;
  outcome: ScheduledRunOutcome;
  reason?: string;
  /** The run's input file; absent when it never started. */
  file?: string;
  defaultModel?: string;
  rows: number;
  skipped: number;
  /** The batch's last progress; absent when it never started. */
  progress?: BatchProgress;
  /** Workflow times (ms). */
  startedAtMs: number;
  endedAtMs: number;
}

/**
 * Activities of a scheduled run's end: watch its batch for a hold that only a person lifts (so the run can end
 * rather than hold the schedule's later ticks), and write its results and its line in the schedule's index of runs.
 */
export function createScheduledRunActivities(deps: {
  outputRoot: string;
  temporalClient?: Client;
  writeResults?: RunResultsWriter;
  logger: Logger;
  /** @default RUN_WATCH_EVERY_MS */
  watchEveryMs?: number;
}) {
  return {
    /**
     * Asks the batch's progress every `watchEveryMs` until the batch is held for good ({@link runShouldEnd}) or has
     * closed. Heartbeats each time: the run cancels it once its batch has ended.
     */
    async watchScheduledBatch(input: { batchId: string }): Promise<RunWatch> {
      const client = deps.temporalClient;
      if (!client) throw new Error('watchScheduledBatch needs the Temporal client (ActivityDeps.temporalClient)');
      const ctx = Context.current();
      const handle = client.workflow.getHandle(batchWorkflowId(input.batchId));
      for (;;) {
        ctx.heartbeat();
        const { status } = await handle.describe();
        if (status.name !== 'RUNNING') return { closed: true };
        const progress = await handle.query<BatchProgress>(QueryName.Progress).catch(() => undefined);
        const hold = progress && runShouldEnd(progress) ? holdOutcome(progress.waiting) : undefined;
        if (hold) return { hold, reason: holdText(progress?.waiting) };
        await ctx.sleep(deps.watchEveryMs ?? RUN_WATCH_EVERY_MS);
      }
    },

    /**
     * Writes the run's result files in its folder, then appends its line to the schedule's `runs.jsonl` (once: a
     * retry finds it there). Returns the line.
     */
    async recordScheduledRun(input: RecordScheduledRunInput): Promise<ScheduledRunEntry> {
      const ctx = Context.current();
      const scheduleDir = path.resolve(deps.outputRoot, input.outDir);
      let resultsCsv: string | undefined;
      if (deps.writeResults) {
        const written = deps.writeResults({
          batchId: input.runId,
          outDir: path.join(scheduleDir, input.runId),
          ...(input.file ? { file: input.file } : {}),
          ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
        });
        resultsCsv = (await whileHeartbeating(ctx, written)).resultsCsv;
      } else {
        deps.logger.warn('no results writer on this worker: the run has no result files', { runId: input.runId });
      }
      // A run that ended before its batch started (its budget spent) ran none of its rows.
      const counts = input.progress ? runCounts(input.progress) : { succeeded: 0, failed: 0, notRun: input.rows };
      const entry: ScheduledRunEntry = {
        runId: input.runId,
        outcome: input.outcome,
        ...(input.reason ? { reason: input.reason } : {}),
        rows: input.rows,
        ...counts,
        skipped: input.skipped,
        spentUsd: input.progress?.spentUsd ?? 0,
        startedAt: new Date(input.startedAtMs).toISOString(),
        endedAt: new Date(input.endedAtMs).toISOString(),
        ...(resultsCsv ? { resultsCsv } : {}),
      };
      await appendRunOnce(path.join(scheduleDir, SCHEDULE_RUNS_INDEX), entry);
      return entry;
    },
  };
}

/** Appends the run's line unless a line of the same run is there already (an earlier attempt wrote it). */
async function appendRunOnce(index: string, entry: ScheduledRunEntry): Promise<void> {
  await mkdir(path.dirname(index), { recursive: true });
  const existing = await readFile(index, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '';
    throw err;
  });
  const seen = existing
    .split('\n')
    .filter((l) => l.trim() !== '')
    .some((l) => runIdOf(l) === entry.runId);
  if (!seen) await appendFile(index, `${JSON.stringify(entry)}\n`, 'utf8');
}

function runIdOf(line: string): string | undefined {
  try {
    return (JSON.parse(line) as { runId?: string }).runId;
  } catch {
    return undefined;
  }
}
