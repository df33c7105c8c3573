import { access } from 'node:fs/promises';
import path from 'node:path';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { validateBatchFile } from '../batch';
import {
  batchWorkflowId,
  QueryName,
  runCounts,
  ScheduledRunOutcome,
  type BatchProgress,
  type ScheduledRunEntry,
} from '../model';
import { runBatchIds } from '../schedules/runs';

/** The line of a run that its own workflow never wrote, with what is known of it. */
export type UnrecordedRun = Omit<ScheduledRunEntry, 'resultsCsv'> & { file?: string };

/**
 * The runs of the schedule in `scheduleDir` that were terminated (the `terminate_other` overlap policy, or a person)
 * and have no line in its index yet: a terminated workflow runs no more code, so it wrote neither. A schedule names
 * each run's workflow `schedule/<run id>` (a schedule id and an ISO time need no escaping). What each knew is read
 * back: its rows from its input copy, its counts and spend from its batch (cancelled with it, its rows recorded).
 */
export async function terminatedRuns(
  client: Client,
  scheduleDir: string,
  recorded: ReadonlySet<string>,
): Promise<UnrecordedRun[]> {
  const out: UnrecordedRun[] = [];
  for (const runId of await runBatchIds(scheduleDir)) {
    if (recorded.has(runId)) continue;
    const run = await describeOrNot(client, `schedule/${runId}`);
    if (run?.status.name !== 'TERMINATED') continue;
    const file = path.join(scheduleDir, runId, 'input.csv');
    const hasFile = await access(file).then(
      () => true,
      () => false,
    );
    const rows = hasFile ? (await validateBatchFile(file)).rows : 0;
    const batch = await batchOf(client, runId);
    const counts = batch.progress ? runCounts(batch.progress) : { succeeded: 0, failed: 0, notRun: rows };
    const spend = batch.progress
      ? {
          spentUsd: batch.progress.spentUsd,
          ...(batch.progress.unknownSpendRows > 0 ? { unknownSpendRows: batch.progress.unknownSpendRows } : {}),
        }
      : batch.started
        ? {}
        : { spentUsd: 0 };
    out.push({
      runId,
      outcome: ScheduledRunOutcome.Terminated,
      reason: `terminated${run.closeTime ? ` at ${run.closeTime.toISOString()}` : ''}: its results written by a later run`,
      rows,
      ...counts,
      ...spend,
      startedAt: run.startTime.toISOString(),
      endedAt: (run.closeTime ?? run.startTime).toISOString(),
      ...(hasFile ? { file } : {}),
    });
  }
  return out;
}

/** The run's batch: never started (nothing sent), or its last progress when it can be read (else unknown). */
async function batchOf(client: Client, runId: string): Promise<{ started: boolean; progress?: BatchProgress }> {
  const handle = client.workflow.getHandle(batchWorkflowId(runId));
  const batch = await describeOrNot(client, handle.workflowId);
  if (!batch) return { started: false };
  const progress =
    batch.status.name === 'RUNNING'
      ? await handle.query<BatchProgress>(QueryName.Progress).catch(() => undefined)
      : await (handle.result() as Promise<BatchProgress>).catch(() => undefined);
  return { started: true, ...(progress ? { progress } : {}) };
}

/** The workflow's description, or undefined when Temporal does not know it (never started, or forgotten). */
export async function describeOrNot(client: Client, workflowId: string) {
  try {
    return await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}
