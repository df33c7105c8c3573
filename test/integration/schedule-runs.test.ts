import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  controlSchedule,
  createSchedule,
  describeSchedule,
  type CreateScheduleOptions,
} from '../../src/cli/schedule/manage';
import { scheduleRuns, scheduleRunsLines } from '../../src/cli/schedule-runs';
import { SCHEDULE_RUNS_INDEX, type ScheduledRunEntry } from '../../src/model';
import { DEMO_ACCOUNT_ID, startSimulator, type Simulator } from '../../src/simulator';
import type { ScheduledBatchResult } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Every scheduled run ends, says how, and writes its results (issue 33), on the dev server under the default overlap
 * policy `skip`, where a run that never ends drops every later tick: a file missing or invalid at fire time fails its
 * run at once and the next trigger runs; a run held by its spend cap ends `paused` and the next trigger runs; every
 * ended run has its results.csv and its line in the schedule's runs.jsonl, without a command.
 */
const env = useTestEnv(() => createLocalEnv());
let sim: Simulator;
let dir: string;
let taskQueue: string;

beforeAll(async () => {
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 120 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200 },
  });
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-schedule-runs-'));
});

/** A worker of the test's own (a worker runs once), on a queue of its own; runs are watched every 200 ms. */
async function newWorker(): Promise<Worker> {
  const made = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: dir,
    prefix: 'sched-runs',
    activityDeps: { scheduledRunWatchEveryMs: 200 },
  });
  taskQueue = made.taskQueue;
  return made.worker;
}
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The workflow ids of the schedule's runs once it has `n` (bounded: fails when a trigger was dropped). */
async function runIds(scheduleId: string, n: number): Promise<string[]> {
  for (let i = 0; i < 300; i++) {
    const d = await describeSchedule(env().client, scheduleId);
    if (d.recentRuns.length >= n) return d.recentRuns.map((r) => r.workflowId);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`schedule ${scheduleId} did not run ${n} times: a trigger was dropped`);
}

/** The run's status once it has closed (bounded: a run still running after it is one that does not end). */
async function closed(workflowId: string): Promise<string> {
  for (let i = 0; i < 300; i++) {
    const { status } = await env().client.workflow.getHandle(workflowId).describe();
    if (status.name !== 'RUNNING') return status.name;
    await new Promise((r) => setTimeout(r, 100));
  }
  return 'RUNNING';
}

async function index(outDir: string): Promise<ScheduledRunEntry[]> {
  const text = await readFile(path.join(outDir, SCHEDULE_RUNS_INDEX), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ScheduledRunEntry);
}

/** The run's batch id: its workflow id without `schedule/`. */
const runIdOf = (workflowId: string) => workflowId.replace(/^schedule\//, '');

async function schedule(file: string, extra: Partial<CreateScheduleOptions> = {}) {
  const scheduleId = `s${randomUUID().slice(0, 8)}`;
  const outDir = path.join(dir, scheduleId);
  await createSchedule({
    client: env().client,
    taskQueue,
    scheduleId,
    source: file,
    outDir,
    every: '1h',
    paused: true,
    defaultModel: 'flux-dev',
    ...extra,
  } as CreateScheduleOptions);
  return { scheduleId, outDir };
}

/** Triggers again: a second trigger of the same second would be dropped as a duplicate. */
async function triggerAgain(scheduleId: string) {
  await new Promise((r) => setTimeout(r, 1100));
  await controlSchedule(env().client, scheduleId, 'trigger');
}

describe('every scheduled run ends, says how, and writes its results (dev server, overlap skip)', () => {
  it('a file missing at fire time fails that run at once, and the next trigger runs', async () => {
    const file = path.join(dir, 'missing.csv');
    await writeFile(file, 'id,prompt\na,a red kite over a beach\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      const { scheduleId, outDir } = await schedule(file);
      await rm(file);
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [first] = await runIds(scheduleId, 1);
      expect(await closed(first!)).toBe('FAILED');
      await writeFile(file, 'id,prompt\na,a red kite over a beach\n');
      await triggerAgain(scheduleId);
      const second = (await runIds(scheduleId, 2)).find((id) => id !== first)!;
      const result = (await env().client.workflow.getHandle(second).result()) as ScheduledBatchResult;
      expect(result.outcome).toBe('completed');
      expect(result.progress?.counts.succeeded).toBe(1);
      const runs = await index(outDir);
      expect(runs.map((r) => [r.runId, r.outcome])).toEqual([
        [runIdOf(first!), 'failed'],
        [runIdOf(second), 'completed'],
      ]);
      expect(runs[0]!.reason).toContain(`cannot read batch file ${file}`);
      expect(runs[1]).toMatchObject({ rows: 1, succeeded: 1, failed: 0, skipped: 0, spentUsd: 0.04 });
      // Results without a command, for both runs.
      for (const run of runs) expect((await stat(path.join(outDir, run.runId, 'results.csv'))).isFile()).toBe(true);
      expect(await readFile(path.join(outDir, runIdOf(second), 'results.csv'), 'utf8')).toContain('succeeded');
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });

  it('a file invalid at fire time ends its run failed, with the line and the reason', async () => {
    const file = path.join(dir, 'invalid.csv');
    await writeFile(file, 'id,prompt\na,a red kite over a beach\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      const { scheduleId, outDir } = await schedule(file);
      await writeFile(file, 'id,prompt,width\na,a red kite over a beach,512\nb,a green tram in the fog,wide\n');
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [run] = await runIds(scheduleId, 1);
      expect(await closed(run!)).toBe('FAILED');
      const [entry] = await index(outDir);
      expect(entry).toMatchObject({ runId: runIdOf(run!), outcome: 'failed', rows: 0 });
      expect(entry!.reason).toContain(`${file}:3 (width): `);
      expect((await stat(path.join(outDir, entry!.runId, 'results.csv'))).isFile()).toBe(true);
      // Nothing was sent for it.
      expect(sim.charges.byIdempotencyKey().filter((s) => s.idempotencyKey.includes(entry!.runId))).toEqual([]);
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });

  it('a run held by its spend cap ends paused, writes its results, and the next trigger runs', async () => {
    const file = path.join(dir, 'capped.csv');
    await writeFile(file, 'id,prompt\na,a red kite over a beach\nb,a green tram in the fog\nc,a blue door\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      // flux-dev costs 0.04 an image: the cap lets one row run, then holds the batch.
      const { scheduleId, outDir } = await schedule(file, { spendCapUsd: 0.05 });
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [first] = await runIds(scheduleId, 1);
      expect(await closed(first!)).toBe('COMPLETED');
      const result = (await env().client.workflow.getHandle(first!).result()) as ScheduledBatchResult;
      expect(result).toMatchObject({ outcome: 'paused', reason: 'spend cap of 0.05 USD reached' });
      expect(result.progress?.counts).toMatchObject({ succeeded: 1, not_run: 2 });
      await triggerAgain(scheduleId);
      const second = (await runIds(scheduleId, 2)).find((id) => id !== first)!;
      expect(await closed(second)).toBe('COMPLETED');
      const runs = await index(outDir);
      expect(runs.map((r) => [r.runId, r.outcome])).toEqual([
        [runIdOf(first!), 'paused'],
        [runIdOf(second), 'paused'],
      ]);
      expect(runs[0]).toMatchObject({ rows: 3, succeeded: 1, notRun: 2, spentUsd: 0.04 });
      for (const run of runs) expect((await stat(path.join(outDir, run.runId, 'results.csv'))).isFile()).toBe(true);
      // `schedule describe` shows each run's outcome and counts, the latest first, and the ticks skipped.
      const view = await scheduleRuns(env().client, scheduleId);
      expect(view.runs.map((r) => r.runId)).toEqual([runIdOf(second), runIdOf(first!)]);
      expect(view.skipped).toEqual({ overlap: 0, missedCatchupWindow: 0 });
      expect(scheduleRunsLines(view)).toContain(
        `  ${runIdOf(first!)} paused at ${runs[0]!.endedAt}: 1 succeeded, 0 failed, 2 not run, ` +
          '0 skipped as paid before, 0.04 USD (spend cap of 0.05 USD reached)',
      );
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });

  it('a run whose batch the service stops ends stopped, and the next trigger runs', async () => {
    const file = path.join(dir, 'stopped.csv');
    await writeFile(file, 'id,prompt\na,a red kite over a beach\nb,a green tram in the fog\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      const { scheduleId, outDir } = await schedule(file);
      // An empty wallet: the service answers 402, which stops the batch until a person acts.
      sim.setWallet(DEMO_ACCOUNT_ID, 0);
      try {
        await controlSchedule(env().client, scheduleId, 'trigger');
        const [first] = await runIds(scheduleId, 1);
        expect(await closed(first!)).toBe('COMPLETED');
        const result = (await env().client.workflow.getHandle(first!).result()) as ScheduledBatchResult;
        expect(result.outcome).toBe('stopped');
        expect(result.reason).toContain('the service stopped the batch: HTTP 402');
      } finally {
        sim.setWallet(DEMO_ACCOUNT_ID, 100);
      }
      await triggerAgain(scheduleId);
      const [, second] = await runIds(scheduleId, 2);
      expect(await closed(second!)).toBe('COMPLETED');
      const runs = await index(outDir);
      expect(runs.map((r) => r.outcome)).toEqual(['stopped', 'completed']);
      expect(runs[0]).toMatchObject({ rows: 2, succeeded: 0, spentUsd: 0 });
      expect(runs[1]).toMatchObject({ rows: 2, succeeded: 2 });
      for (const run of runs) expect((await stat(path.join(outDir, run.runId, 'results.csv'))).isFile()).toBe(true);
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });

  it("a schedule's budget a day caps its runs together: the run that finds it spent ends before its batch", async () => {
    const file = path.join(dir, 'budget.csv');
    await writeFile(file, 'id,prompt\na,a white owl at night\nb,a stone bridge in rain\nc,a paper boat\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      // flux-dev costs 0.04 an image: the day's budget pays for one row, whichever run sends it.
      const { scheduleId, outDir } = await schedule(file, { budget: { perDayUsd: 0.04 } });
      expect((await describeSchedule(env().client, scheduleId)).asks).toEqual({
        eachRun: 'all',
        budget: { perDayUsd: 0.04, timezone: 'UTC' },
      });
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [first] = await runIds(scheduleId, 1);
      expect(await closed(first!)).toBe('COMPLETED');
      const capped = (await env().client.workflow.getHandle(first!).result()) as ScheduledBatchResult;
      expect(capped).toMatchObject({
        outcome: 'paused',
        reason: "spend cap of 0.04 USD reached (what was left of the schedule's budget)",
      });
      expect(capped.progress?.counts).toMatchObject({ succeeded: 1, not_run: 2 });
      await triggerAgain(scheduleId);
      const second = (await runIds(scheduleId, 2)).find((id) => id !== first)!;
      expect(await closed(second)).toBe('COMPLETED');
      const spent = (await env().client.workflow.getHandle(second).result()) as ScheduledBatchResult;
      expect(spent).toMatchObject({
        outcome: 'paused',
        reason: "the schedule's budget of 0.04 USD a day (UTC) is spent: 0.04 USD",
      });
      expect(spent.progress).toBeUndefined();
      const runs = await index(outDir);
      expect(runs[1]).toMatchObject({ runId: runIdOf(second), rows: 3, succeeded: 0, notRun: 3, spentUsd: 0 });
      expect((await stat(path.join(outDir, runs[1]!.runId, 'results.csv'))).isFile()).toBe(true);
      // One creation in all for the schedule: the budget was never passed.
      const charged = sim.charges.byIdempotencyKey().filter((k) => k.creationIds.length > 0);
      expect(charged.filter((k) => runs.some((r) => k.idempotencyKey.includes(r.runId)))).toHaveLength(1);
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });

  it('--each-run new: a row inserted at the top of a file without ids runs, and no paid prompt is paid again', async () => {
    const file = path.join(dir, 'no-ids.csv');
    await writeFile(file, 'prompt\na red kite over a beach\na green tram in the fog\n');
    await (
      await newWorker()
    ).runUntil(async () => {
      const { scheduleId, outDir } = await schedule(file, { eachRun: 'new' });
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [first] = await runIds(scheduleId, 1);
      expect(await closed(first!)).toBe('COMPLETED');
      // A new row at the top: every positional id shifts by one.
      await writeFile(file, 'prompt\na blue door in the snow\na red kite over a beach\na green tram in the fog\n');
      await triggerAgain(scheduleId);
      const second = (await runIds(scheduleId, 2)).find((id) => id !== first)!;
      expect(await closed(second)).toBe('COMPLETED');
      const runs = await index(outDir);
      expect(runs[0]).toMatchObject({ outcome: 'completed', rows: 2, succeeded: 2, skipped: 0 });
      expect(runs[1]).toMatchObject({ outcome: 'completed', rows: 1, succeeded: 1, skipped: 2 });
      expect(await readFile(path.join(outDir, runs[1]!.runId, 'input.csv'), 'utf8')).toContain(
        'a blue door in the snow',
      );
      // Three creations for three prompts, across both runs.
      const ids = runs.map((r) => r.runId);
      const charged = sim.charges.byIdempotencyKey().filter((k) => ids.some((id) => k.idempotencyKey.includes(id)));
      expect(charged.filter((k) => k.netCharged > 0)).toHaveLength(3);
      expect(charged.every((k) => k.netCharged <= 1)).toBe(true);
      await controlSchedule(env().client, scheduleId, 'delete');
    });
  });
});
