import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { batchWorkflowId, promptWorkflowId } from '../../src/model';

/** History events of a batch: its own runs (continue-as-new hops), and a sample of its rows. */
export interface HistoryCounts {
  /** Events of every run of the batch workflow together. */
  batchEvents: number;
  batchRuns: number;
  /** Workflow tasks of the batch, all runs. */
  batchWorkflowTasks: number;
  /**
   * Share of the batch's lifetime during which one of its workflow tasks was scheduled or running: near 1, the
   * batch workflow (one task at a time) is what paces the rows.
   */
  batchTaskBusyShare: number;
  /** Mean time from a batch workflow task's scheduling to its completion, ms. */
  batchTaskMeanMs: number;
  /** Mean events of the sampled row workflows. */
  meanRowEvents: number;
  sampledRows: number;
  /** Events per row of the whole system: (batch events + rows x mean row events) / rows. */
  eventsPerRow: number;
  /** Event types of one sampled row, in order: what a row's history is made of. */
  rowEventTypes: string[];
}

const EventType = temporal.api.enums.v1.EventType;

/** Milliseconds of a protobuf timestamp. */
function msOf(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  if (!t) return 0;
  const s = t.seconds as number | { toNumber(): number } | null | undefined;
  const seconds = typeof s === 'object' && s !== null ? s.toNumber() : Number(s ?? 0);
  return seconds * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

function typeName(type: number | null | undefined): string {
  const name = EventType[type ?? 0] ?? String(type);
  return name.replace(/^EVENT_TYPE_/, '');
}

/** Counts history events of `batchId` (every run) and of `sample` evenly spaced rows among `rowIds`. */
export async function countHistories(
  client: Client,
  batchId: string,
  rowIds: readonly string[],
  sample = 20,
): Promise<HistoryCounts> {
  let batchEvents = 0;
  let batchRuns = 0;
  let tasks = 0;
  let busyMs = 0;
  let lifeMs = 0;
  for await (const run of client.workflow.list({ query: `WorkflowId = '${batchWorkflowId(batchId)}'` })) {
    const events = (await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory()).events ?? [];
    batchEvents += events.length;
    batchRuns++;
    let scheduledAt: number | undefined;
    for (const e of events) {
      const at = msOf(e.eventTime);
      if (e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED) scheduledAt = at;
      if (e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED && scheduledAt !== undefined) {
        busyMs += at - scheduledAt;
        tasks++;
        scheduledAt = undefined;
      }
    }
    lifeMs += msOf(events.at(-1)?.eventTime) - msOf(events[0]?.eventTime);
  }
  const step = Math.max(1, Math.floor(rowIds.length / sample));
  const picked = rowIds.filter((_, i) => i % step === 0).slice(0, sample);
  let rowEvents = 0;
  let rowEventTypes: string[] = [];
  for (const rowId of picked) {
    const history = await client.workflow.getHandle(promptWorkflowId(batchId, rowId)).fetchHistory();
    const events = history.events ?? [];
    rowEvents += events.length;
    if (rowEventTypes.length === 0) rowEventTypes = events.map((e) => typeName(e.eventType));
  }
  const meanRowEvents = picked.length ? rowEvents / picked.length : 0;
  return {
    batchEvents,
    batchRuns,
    batchWorkflowTasks: tasks,
    batchTaskBusyShare: lifeMs ? busyMs / lifeMs : 0,
    batchTaskMeanMs: tasks ? busyMs / tasks : 0,
    meanRowEvents,
    sampledRows: picked.length,
    eventsPerRow: rowIds.length ? (batchEvents + meanRowEvents * rowIds.length) / rowIds.length : 0,
    rowEventTypes,
  };
}
