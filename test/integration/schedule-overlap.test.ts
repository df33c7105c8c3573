import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse/sync';
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  controlSchedule,
  createSchedule,
  describeSchedule,
  type OverlapPolicyName,
} from '../../src/cli/schedule/manage';
import { CreationOutcome, startSimulator, type Simulator } from '../../src/simulator';
import type { ScheduledBatchResult } from '../../src/workflows';
import { parseIdempotencyKey, SCHEDULE_RUNS_INDEX, type ScheduledRunEntry } from '../../src/model';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';
import { waitUntil, within, writeBatchCsv } from './helpers';

/**
 * A schedule with --skip-succeeded whose first run is stopped mid-way (cancel_other, terminate_other) or overlapped
 * (allow_all) by a second, then run a third time once everything has settled. Counted at the simulator, per row id
 * across the three runs (each run is a batch of its own, with keys of its own): no row is charged twice, every row
 * charged before the second run was triggered is left out of it, and after the third run every row is paid exactly
 * once, so nothing is lost to a claim either.
 */
const env = useTestEnv(() => createLocalEnv());
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({
    // Slow enough creations that a run of 12 rows, 3 at a time, is stopped with rows done, in flight and unstarted.
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 1200, maxMs: 2400 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-schedule-overlap-'));
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The batch id a run of a schedule gets from its workflow id (as scheduledBatchWorkflow names it). */
const batchIdOfRun = (workflowId: string) =>
  workflowId
    .replace(/^schedule\//, '')
    .replace(/[^A-Za-z0-9._:-]/g, '-')
    .slice(-128);

/** The schedule's runs, oldest first, as workflow ids. */
async function runIds(scheduleId: string): Promise<string[]> {
  const d = await describeSchedule(env().client, scheduleId);
  return [...d.recentRuns].sort((a, b) => a.scheduledAt.localeCompare(b.scheduledAt)).map((r) => r.workflowId);
}

/** Triggers the schedule and returns the new run's workflow id. */
async function trigger(scheduleId: string): Promise<string> {
  const before = new Set(await runIds(scheduleId));
  await controlSchedule(env().client, scheduleId, 'trigger');
  return waitUntil('the new run', async () => (await runIds(scheduleId)).find((id) => !before.has(id)), 20_000, 100);
}

/** Every creation of the simulator under a key of one of `batchIds`, with its batch and row ids. */
function creationsOf(batchIds: readonly string[]) {
  return sim.charges.byCreation().flatMap((c) => {
    const key = parseIdempotencyKey(c.idempotencyKey ?? '');
    return key && batchIds.includes(key.batchId) ? [{ ...c, batchId: key.batchId, rowId: key.rowId }] : [];
  });
}

const inputIds = async (runDir: string) =>
  (await readFile(path.join(runDir, 'input.csv'), 'utf8'))
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(',')[0]!);

async function rowsClosed(batchId: string, rowIds: readonly string[]): Promise<boolean> {
  for (const rowId of rowIds) {
    try {
      const { status } = await env().client.workflow.getHandle(`${batchId}/${rowId}`).describe();
      if (status.name === 'RUNNING') return false;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return true;
}

/** When each row workflow of a batch that ever started closed (ms since the epoch). */
async function rowCloseTimes(batchId: string, rowIds: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const rowId of rowIds) {
    try {
      const { closeTime } = await env().client.workflow.getHandle(`${batchId}/${rowId}`).describe();
      if (closeTime) out.set(rowId, closeTime.getTime());
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return out;
}

const EXPECTED_FIRST_RUN_STATUS: Record<string, string> = {
  cancel_other: 'CANCELLED',
  terminate_other: 'TERMINATED',
  allow_all: 'COMPLETED',
};

async function scenario(policy: OverlapPolicyName): Promise<void> {
  const folder = path.join(dir, policy);
  await mkdir(folder, { recursive: true });
  const file = path.join(folder, 'prompts.csv');
  const rowIds = await writeBatchCsv(file, 12);
  const outDir = path.join(folder, 'out');
  const { worker, taskQueue } = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: folder,
    prefix: 'overlap',
  });
  const scheduleId = `ov-${policy.replace('_', '-')}-${randomUUID().slice(0, 8)}`;
  const batches: string[] = [];
  let chargedBeforeSecond = new Set<string>();
  let second: ScheduledBatchResult | undefined;
  let third: ScheduledBatchResult | undefined;
  let firstStatus = '';
  /** Whether run 2 started while rows of run 1 still ran. */
  let overlapped = false;
  /** When run 1's workflow closed, and whether that was before run 2 started. */
  let run1Close: number | undefined;
  let run1ClosedFirst = false;
  /** Rows of run 2's input that run 1 started too (both runs went for them: claims decided). */
  let rowsOfBoth: string[] = [];

  await worker.runUntil(async () => {
    await createSchedule({
      client: env().client,
      taskQueue,
      scheduleId,
      source: file,
      outDir,
      every: '1h',
      paused: true,
      eachRun: 'new',
      defaultModel: 'sdxl',
      concurrency: 3,
      overlap: policy,
    });
    const run1 = await trigger(scheduleId);
    batches.push(batchIdOfRun(run1));
    // Mid-way: rows done, rows in flight (paid, not ended), rows not started.
    await waitUntil(
      'run 1 mid-way',
      async () => {
        const cs = creationsOf(batches);
        const done = cs.filter((c) => c.outcome === CreationOutcome.Succeeded).length;
        const inFlight = cs.filter((c) => c.outcome === CreationOutcome.InFlight).length;
        return done >= 2 && inFlight >= 1 ? true : undefined;
      },
      60_000,
      50,
    );
    chargedBeforeSecond = new Set(creationsOf(batches).map((c) => c.rowId));
    expect(chargedBeforeSecond.size).toBeLessThan(rowIds.length);

    const run2 = await trigger(scheduleId);
    batches.push(batchIdOfRun(run2));
    second = (await within('run 2', 120_000, env().client.workflow.getHandle(run2).result())) as ScheduledBatchResult;
    firstStatus = await waitUntil(
      'run 1 to close',
      async () => {
        const { status } = await env().client.workflow.getHandle(run1).describe();
        return status.name === 'RUNNING' ? undefined : status.name;
      },
      60_000,
    );
    // Every row of both runs over (a stopped run's rows end on their own, after their batch's cancel).
    await waitUntil(
      'the rows of runs 1 and 2 to close',
      async () =>
        (await rowsClosed(batches[0]!, rowIds)) && (await rowsClosed(batches[1]!, rowIds)) ? true : undefined,
      60_000,
    );
    const run2Start = (await env().client.workflow.getHandle(run2).describe()).startTime.getTime();
    run1Close = (await env().client.workflow.getHandle(run1).describe()).closeTime?.getTime();
    const closes1 = await rowCloseTimes(batches[0]!, rowIds);
    overlapped = Math.max(...closes1.values()) > run2Start;
    run1ClosedFirst = run1Close !== undefined && run1Close <= run2Start;
    const input2 = await inputIds(path.join(outDir, batches[1]!));
    rowsOfBoth = input2.filter((id) => closes1.has(id));

    await sleep(1100); // a trigger in the same second as the last would be dropped as a duplicate
    const run3 = await trigger(scheduleId);
    batches.push(batchIdOfRun(run3));
    third = (await within('run 3', 120_000, env().client.workflow.getHandle(run3).result())) as ScheduledBatchResult;
    await controlSchedule(env().client, scheduleId, 'delete');
  });

  const creations = creationsOf(batches);
  const netByRow = new Map<string, number>();
  for (const c of creations) if (c.netUsd > 0) netByRow.set(c.rowId, (netByRow.get(c.rowId) ?? 0) + 1);
  const chargedTwice = [...netByRow].filter(([, n]) => n > 1).map(([id]) => id);
  expect(chargedTwice, 'rows charged more than once across the runs').toEqual([]);
  // Nothing lost either: after the third run every row is paid for exactly once.
  expect(
    rowIds.filter((id) => netByRow.get(id) !== 1),
    'rows not paid exactly once',
  ).toEqual([]);
  expect(sim.charges.isConsistent()).toBe(true);
  // The schedule's overlap policy applied to the trigger.
  expect(firstStatus).toBe(EXPECTED_FIRST_RUN_STATUS[policy]);

  // Rows paid before the second run was triggered are left out of it; the third leaves out every paid row.
  const input2 = await inputIds(path.join(outDir, batches[1]!));
  expect(input2.filter((id) => chargedBeforeSecond.has(id))).toEqual([]);
  expect(second!.skipped).toBeGreaterThanOrEqual(chargedBeforeSecond.size);
  const paidBeforeThird = new Set(creations.filter((c) => c.batchId !== batches[2]).map((c) => c.rowId));
  const input3 = await inputIds(path.join(outDir, batches[2]!));
  expect(input3.filter((id) => paidBeforeThird.has(id))).toEqual([]);
  expect(third!.rows + third!.skipped).toBe(rowIds.length);
  // The runs did overlap where the policy lets them: rows of the stopped run were still running, or (allow_all) both
  // runs went for the same rows.
  if (policy !== 'cancel_other') expect(overlapped).toBe(true);
  expect(run1Close, 'run 1 closed').toBeDefined();
  if (policy === 'allow_all') expect(rowsOfBoth.length).toBeGreaterThan(0);
  if (policy === 'cancel_other') {
    // cancel_other waits for the cancelled run to close, and that run closes once each of its rows has written its
    // record and reported it (a row's workflow may close a moment after its report, so row close times prove nothing
    // here). The second run starts after: it leaves out every row the first paid for.
    expect(run1ClosedFirst, 'run 1 closed before run 2 started').toBe(true);
    const paidByFirst = new Set(creations.filter((c) => c.batchId === batches[0]).map((c) => c.rowId));
    expect(input2.filter((id) => paidByFirst.has(id))).toEqual([]);
  }
  if (policy === 'terminate_other') {
    // The terminated run ran no more code: the next run to end wrote its results and its line, before its own.
    const lines = (await readFile(path.join(outDir, SCHEDULE_RUNS_INDEX), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ScheduledRunEntry);
    expect(lines.map((l) => [l.runId, l.outcome])).toEqual([
      [batches[0], 'terminated'],
      [batches[1], second!.outcome],
      [batches[2], third!.outcome],
    ]);
    expect(lines[0]!.rows).toBe(rowIds.length);
    expect(lines[0], 'what its preparation left out is not known').not.toHaveProperty('skipped');
    // Its results list every row of its input, each in its state (a row whose creation it paid is not `not_run`).
    const results = parse(await readFile(path.join(outDir, batches[0]!, 'results.csv'), 'utf8'), { columns: true });
    const states = new Map((results as { row_id: string; state: string }[]).map((r) => [r.row_id, r.state]));
    expect([...states.keys()].sort()).toEqual([...(await inputIds(path.join(outDir, batches[0]!)))].sort());
    const paidByFirst = creations.filter((c) => c.batchId === batches[0] && c.netUsd > 0).map((c) => c.rowId);
    expect(paidByFirst.length).toBeGreaterThan(0);
    for (const id of paidByFirst) expect(states.get(id), id).not.toBe('not_run');
  }
}

describe('schedules with --skip-succeeded across overlap policies (dev server, simulator)', () => {
  it('cancel_other: the cancelled run paid for rows; the next one pays for none of them again', async () => {
    await scenario('cancel_other');
  }, 300_000);

  it('terminate_other: rows of the terminated run are still in flight; the next one never pays for them', async () => {
    await scenario('terminate_other');
  }, 300_000);

  it('allow_all: two runs at once never both pay for one row', async () => {
    await scenario('allow_all');
  }, 300_000);
});
