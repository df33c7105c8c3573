import { randomUUID } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlSchedule, createSchedule, describeSchedule } from '../../src/cli/schedule/manage';
import { startSimulator, type Simulator } from '../../src/simulator';
import { paidRequests } from '../../src/schedules/prepare';
import type { ScheduledBatchResult } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';
import { testPrint } from '../helpers/ledger';
import { inProcessCli } from '../cli/in-process';

/**
 * Scheduled pipelines on the dev server (the time-skipping server has no schedules): a schedule triggered twice
 * over a file that grew in between pays only for the new rows, and each run is a batch of its own.
 */
const env = useTestEnv(() => createLocalEnv());
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 120 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200 },
  });
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-schedule-'));
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function waitForRuns(scheduleId: string, n: number): Promise<ScheduledBatchResult[]> {
  for (let i = 0; i < 200; i++) {
    const d = await describeSchedule(env().client, scheduleId);
    if (d.recentRuns.length >= n) {
      const results: ScheduledBatchResult[] = [];
      for (const run of d.recentRuns.slice(0, n)) {
        results.push((await env().client.workflow.getHandle(run.workflowId).result()) as ScheduledBatchResult);
      }
      return results;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`schedule ${scheduleId} did not run ${n} times`);
}

describe('schedules (dev server)', () => {
  it('a growing file with --skip-succeeded pays only for its new rows; each run is a fresh batch', async () => {
    const file = path.join(dir, 'prompts.csv');
    await writeFile(
      file,
      'id,prompt\na,a red kite over a beach\nb,a green tram in the fog\nc,a blue door in a white wall\n',
    );
    const { worker, taskQueue, ledger } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'sched',
    });
    const scheduleId = `s${randomUUID().slice(0, 8)}`;
    await worker.runUntil(async () => {
      await createSchedule({
        client: env().client,
        taskQueue,
        scheduleId,
        source: file,
        outDir: path.join(dir, 'out'),
        every: '1h',
        paused: true,
        eachRun: 'new',
        defaultModel: 'flux-dev',
        overlap: 'buffer_one',
      });
      await controlSchedule(env().client, scheduleId, 'trigger');
      const [first] = await waitForRuns(scheduleId, 1);
      expect(first!.rows).toBe(3);
      expect(first!.progress?.counts.succeeded).toBe(3);

      await appendFile(file, 'd,a yellow kayak on a lake\ne,an orange lantern at night\n');
      // A second trigger of the same instant would be dropped as a duplicate: wait a second.
      await new Promise((r) => setTimeout(r, 1100));
      await controlSchedule(env().client, scheduleId, 'trigger');
      const runs = await waitForRuns(scheduleId, 2);
      const second = runs.find((r) => r.batchId !== first!.batchId)!;
      expect(second.skipped).toBe(3);
      expect(second.rows).toBe(2);
      expect(second.progress?.counts.succeeded).toBe(2);
      await controlSchedule(env().client, scheduleId, 'delete');
    });
    // Five creations in all: one per row, never one again for a row that had succeeded.
    const accepted = sim.charges.byIdempotencyKey().filter((s) => s.creationIds.length > 0);
    expect(accepted).toHaveLength(5);
    expect(sim.charges.isConsistent()).toBe(true);
    // The runs' ledgers are the schedule's record: every row paid once, and nothing else written.
    const paid = await paidRequests(path.join(dir, 'out'), { store: ledger, fingerprintOf: testPrint });
    expect(paid.prints.size).toBe(5);
    expect(paid.ids.size).toBe(0);
    await expect(readFile(path.join(dir, 'out', 'succeeded-ids.txt'))).rejects.toThrow(/ENOENT/);
  });
});

describe('when a schedule runs, as describe says it (issue 33)', () => {
  const cli = inProcessCli('imagebatch-schedule-describe-');

  it('describe shows the time zone, the catch-up window and the jitter; the defaults are one interval and none', async () => {
    const client = env().client;
    const common = { client, taskQueue: 'no-worker', source: 'x.csv', outDir: dir, paused: true };
    const nightly = `n${randomUUID().slice(0, 8)}`;
    const often = `o${randomUUID().slice(0, 8)}`;
    await createSchedule({
      ...common,
      scheduleId: nightly,
      cron: '0 2 * * *',
      timezone: 'Europe/Paris',
      jitterMs: 300_000,
    });
    await createSchedule({ ...common, scheduleId: often, every: '15m' });
    try {
      expect((await describeSchedule(client, nightly)).timing).toEqual({
        when: 'cron 0 2 * * *',
        timezone: 'Europe/Paris',
        catchupWindowMs: 86_400_000,
        jitterMs: 300_000,
      });
      expect((await describeSchedule(client, often)).timing).toEqual({
        when: 'every 15 min',
        timezone: 'UTC',
        catchupWindowMs: 900_000,
        jitterMs: 0,
      });
      const code = await cli.run({ TEMPORAL_ADDRESS: env().address }, 'schedule', 'describe', nightly);
      expect(code, cli.stderr.join('')).toBe(0);
      const printed = cli.stdout.join('');
      expect(printed).toContain('runs: cron 0 2 * * * (Europe/Paris)\n');
      expect(printed).toContain('catch-up window: 24 h, jitter: 5 min\n');
    } finally {
      for (const id of [nightly, often]) await controlSchedule(client, id, 'delete');
    }
  });
});
