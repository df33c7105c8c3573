import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULE_RUNS_INDEX, SCHEDULED_RUN_CANNOT_START, type ScheduledRunEntry } from '../../src/model';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * A scheduled run's activities: a file that cannot start the run fails it at once (not retried), naming the file,
 * or each problem's line and reason; a run that ended writes its result files and one line in the schedule's index.
 */
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => cleanup());

const prepare = (source: string, check = true) => {
  // The sources are beside the schedule's folder: a folder the deployment lets schedules read.
  const { activities } = activitiesFor('http://127.0.0.1:9/v1', { scheduleSources: [dir] }, { outputRoot: dir });
  return runActivity(() =>
    activities.prepareScheduledRun({
      source,
      outDir: path.join(dir, 'out'),
      batchId: `run-${path.basename(source)}`,
      skipSucceeded: false,
      defaultModel: 'flux-dev',
      ...(check ? { check: { defaultModel: 'flux-dev' } } : {}),
    }),
  );
};

describe('a scheduled run that cannot start', () => {
  it('fails at once, not retried, when its file is missing (also for runs that do not check the file)', async () => {
    for (const check of [true, false]) {
      const { failure } = await prepare(path.join(dir, 'gone.csv'), check);
      expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
      expect(failure!.message).toContain(path.join(dir, 'gone.csv'));
    }
  });

  it('fails at once when its file has problems, naming each line and reason as validate does', async () => {
    const file = path.join(dir, 'bad.csv');
    await writeFile(file, 'id,prompt,width\na,a red kite,512\nb,a green tram,abc\n');
    const { failure } = await prepare(file);
    expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
    expect(failure!.message).toMatch(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3 \\(width\\): `));
  });

  it('runs a valid file, and one with a header and no rows (an empty run)', async () => {
    const file = path.join(dir, 'ok.csv');
    await writeFile(file, 'id,prompt\na,a red kite\n');
    expect((await prepare(file)).value).toMatchObject({ rows: 1 });
    const empty = path.join(dir, 'empty.csv');
    await writeFile(empty, 'id,prompt\n');
    expect((await prepare(empty)).value).toMatchObject({ rows: 0 });
  });
});

describe("a scheduled run's end", () => {
  it('writes its result files through the writer and its line in runs.jsonl once, a retry included', async () => {
    const written: unknown[] = [];
    const { activities } = activitiesFor(
      'http://127.0.0.1:9/v1',
      {},
      {
        outputRoot: dir,
        writeResults: (run) => {
          written.push(run);
          return Promise.resolve({ resultsCsv: path.join(run.outDir, 'results.csv') });
        },
      },
    );
    const input = {
      outDir: 'sched',
      runId: 'run-1',
      outcome: 'failed' as const,
      reason: 'cannot read batch file x.csv',
      rows: 0,
      skipped: 0,
      startedAtMs: Date.UTC(2025, 0, 1),
      endedAtMs: Date.UTC(2025, 0, 1, 0, 0, 2),
    };
    await runActivity(() => activities.recordScheduledRun(input));
    await runActivity(() => activities.recordScheduledRun(input));
    expect(written).toEqual([
      { batchId: 'run-1', outDir: path.join(dir, 'sched', 'run-1') },
      { batchId: 'run-1', outDir: path.join(dir, 'sched', 'run-1') },
    ]);
    const lines = (await readFile(path.join(dir, 'sched', SCHEDULE_RUNS_INDEX), 'utf8')).trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as ScheduledRunEntry)).toEqual([
      {
        runId: 'run-1',
        outcome: 'failed',
        reason: 'cannot read batch file x.csv',
        rows: 0,
        succeeded: 0,
        failed: 0,
        notRun: 0,
        skipped: 0,
        spentUsd: 0,
        startedAt: '2025-01-01T00:00:00.000Z',
        endedAt: '2025-01-01T00:00:02.000Z',
        resultsCsv: path.join(dir, 'sched', 'run-1', 'results.csv'),
      },
    ]);
  });
});
