import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  batchWorkflowId,
  runCounts,
  runHold,
  QueryName,
  SCHEDULE_RUNS_INDEX,
  type BatchProgress,
  type RunHold,
  type RunResultsWriter,
  type ScheduledRunEntry,
  type ScheduledRunOutcome,
} from '../model';
import type { Logger } from '../api/client';
import { whileHeartbeating } from './heartbeat';
import { terminatedRuns } from './scheduled-run-sweep';

/** How often a scheduled run asks its batch's progress while it runs. */
export const RUN_WATCH_EVERY_MS = 5_000;

/** What a scheduled run's watch saw: its batch held by something only a person lifts, or its batch closed. */
export type RunWatch = RunHold | { closed: true };

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
        const hold = progress ? runHold(progress) : undefined;
        if (hold) return hold;
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
      const index = path.join(scheduleDir, SCHEDULE_RUNS_INDEX);
      const write = async (runId: string, file: string | undefined) => {
        if (!deps.writeResults) {
          deps.logger.warn('no results writer on this worker: the run has no result files', { runId });
          return {};
        }
        const written = deps.writeResults({
          batchId: runId,
          outDir: path.join(scheduleDir, runId),
          ...(file ? { file } : {}),
          ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
        });
        return { resultsCsv: (await whileHeartbeating(ctx, written)).resultsCsv };
      };
      // Runs terminated before (they ran no more code) get their results and their line first.
      if (deps.temporalClient) {
        const others = new Set(await recordedRunIds(index));
        others.add(input.runId);
        const terminated = await whileHeartbeating(ctx, terminatedRuns(deps.temporalClient, scheduleDir, others));
        for (const { file, ...line } of terminated)
          await appendRunOnce(index, { ...line, ...(await write(line.runId, file)) });
      }
      const written = await write(input.runId, input.file);
      // A run that ended before its batch started (its budget spent) ran none of its rows.
      const counts = input.progress ? runCounts(input.progress) : { succeeded: 0, failed: 0, notRun: input.rows };
      const unknownSpendRows = input.progress?.unknownSpendRows ?? 0;
      const entry: ScheduledRunEntry = {
        runId: input.runId,
        outcome: input.outcome,
        ...(input.reason ? { reason: input.reason } : {}),
        rows: input.rows,
        ...counts,
        skipped: input.skipped,
        // No batch: nothing was sent, so nothing was spent.
        spentUsd: input.progress?.spentUsd ?? 0,
        ...(unknownSpendRows > 0 ? { unknownSpendRows } : {}),
        startedAt: new Date(input.startedAtMs).toISOString(),
        endedAt: new Date(input.endedAtMs).toISOString(),
        ...written,
      };
      await appendRunOnce(index, entry);
      return entry;
    },
  };
}

/** The run ids the schedule's index lists. */
async function recordedRunIds(index: string): Promise<string[]> {
  const text = await readFile(index, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '';
    throw err;
  });
  return text.split('\n').flatMap((l) => {
    const id = l.trim() === '' ? undefined : runIdOf(l);
    return id === undefined ? [] : [id];
  });
}

/** Appends the run's line unless a line of the same run is there already (an earlier attempt wrote it). */
async function appendRunOnce(index: string, entry: ScheduledRunEntry): Promise<void> {
  await mkdir(path.dirname(index), { recursive: true });
  if (!(await recordedRunIds(index)).includes(entry.runId)) {
    await appendFile(index, `${JSON.stringify(entry)}\n`, 'utf8');
  }
}

function runIdOf(line: string): string | undefined {
  try {
    return (JSON.parse(line) as { runId?: string }).runId;
  } catch {
    return undefined;
  }
}
