import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { SCHEDULE_RUNS_INDEX, type ScheduledRunEntry } from '../model';

/** Runs `schedule describe` shows, the latest first. */
export const RECENT_RUNS_SHOWN = 10;

/** What `schedule describe` adds about a schedule's runs: how each ended, and the ticks it skipped. */
export interface ScheduleRunsView {
  /** The schedule's runs.jsonl, as the workers see it. */
  index: string;
  /** Why the index could not be read here (no run ended yet, or the folder is on another machine). */
  indexNote?: string;
  /** The latest runs that ended, the latest first. */
  runs: ScheduledRunEntry[];
  /** Ticks Temporal skipped: a run still ran (overlap policy `skip`), or the worker or server was down too long. */
  skipped: { overlap: number; missedCatchupWindow: number };
}

/** Reads how the schedule's latest runs ended (its runs.jsonl) and the ticks Temporal says it skipped. */
export async function scheduleRuns(client: Client, scheduleId: string): Promise<ScheduleRunsView> {
  const d = await client.schedule.getHandle(scheduleId).describe();
  const input = d.action.args?.[0] as { outDir?: unknown } | undefined;
  const outDir = typeof input?.outDir === 'string' ? input.outDir : '';
  const index = path.resolve(outDir, SCHEDULE_RUNS_INDEX);
  const skipped = {
    overlap: d.info.numActionsSkippedOverlap,
    missedCatchupWindow: d.info.numActionsMissedCatchupWindow,
  };
  try {
    const runs = (await readFile(index, 'utf8'))
      .split('\n')
      .filter((l) => l.trim() !== '')
      .flatMap((l) => parseEntry(l));
    return { index, runs: runs.reverse().slice(0, RECENT_RUNS_SHOWN), skipped };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const indexNote =
      code === 'ENOENT' ? 'no run has ended yet, or the runs write on another machine' : (err as Error).message;
    return { index, indexNote, runs: [], skipped };
  }
}

function parseEntry(line: string): ScheduledRunEntry[] {
  try {
    return [JSON.parse(line) as ScheduledRunEntry];
  } catch {
    return [];
  }
}

/** The lines `schedule describe` prints about the runs. */
export function scheduleRunsLines(view: ScheduleRunsView): string[] {
  const { overlap, missedCatchupWindow } = view.skipped;
  const lines = [
    `ticks skipped: ${overlap} while a run still ran (overlap policy), ${missedCatchupWindow} past the catch-up window`,
  ];
  if (view.indexNote) return [...lines, `runs: ${view.index}: ${view.indexNote}`];
  lines.push(`runs (latest first, from ${view.index}):`);
  for (const r of view.runs) {
    lines.push(
      `  ${r.runId} ${r.outcome} at ${r.endedAt}: ${r.succeeded} succeeded, ${r.failed} failed, ${r.notRun} not run, ` +
        `${r.skipped ?? 'unknown'} skipped as paid before, ${spentText(r)}${r.reason ? ` (${r.reason})` : ''}`,
    );
  }
  return lines;
}

/** What a run spent: known, at least (rows of unknown spend on top), or unknown. */
function spentText(r: ScheduledRunEntry): string {
  const unknown = r.unknownSpendRows ? ` and ${r.unknownSpendRows} row(s) of unknown spend` : '';
  return r.spentUsd === undefined ? 'spend unknown' : `${r.spentUsd} USD${unknown}`;
}
