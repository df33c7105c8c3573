import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  NativeConnection,
  type Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultServiceConfig } from '../../src/config/service-config';
import { DEFAULT_SHUTDOWN_GRACE_MS } from '../../src/config/temporal-config';
import { DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { createWorker, workflowsPath } from '../../src/worker';
import { batchWorkflowId } from '../../src/model';
import { batchWorkflow } from '../../src/workflows';
import { progressQuery } from '../../src/workflows/definitions';
import { ASK_BATCH_BEFORE_NEW_KEY } from '../../src/workflows/prompt-workflow';
import { REPO_ROOT, rowOutcomes, sha256Of, waitUntil, within, writeBatchCsv } from './helpers';
import { temporal } from '@temporalio/proto';
import { tempLedger } from '../helpers/ledger';

/**
 * Deploying a new worker version in the middle of a batch. Worker "v1" runs the workflow code as it was just before
 * a real patch (`ask-batch-before-new-key`, taken from git history), "v2" runs today's code. Every third row's first
 * creation fails (refunded, retryable), so rows take the patched path: a new key. v1 starts the batch and is shut
 * down gracefully with rows in flight; v2 takes over: what v1 did replays on v2 unchanged (no patch marker), the new
 * keys v2 starts take the new path, and nothing fails to replay.
 */
const ROWS = 30;
const V1 = 'imagebatch-v1';
const V2 = 'imagebatch-v2';

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let connection: Connection | undefined;
let native: NativeConnection | undefined;
let v1Bundle: WorkflowBundleWithSourceMap;
let v2Bundle: WorkflowBundleWithSourceMap;
let v1Commit: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-upgrade-'));
  v1Commit = commitBeforePatch(ASK_BATCH_BEFORE_NEW_KEY);
  const v1Root = path.join(dir, 'v1');
  await mkdir(v1Root);
  const archive = execFileSync('git', ['archive', '--format=tar', v1Commit, 'src'], {
    cwd: REPO_ROOT,
    maxBuffer: 256 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', v1Root], { input: archive });
  // The old sources resolve @temporalio/* and the rest from this checkout's dependencies.
  await symlink(path.join(REPO_ROOT, 'node_modules'), path.join(v1Root, 'node_modules'), 'dir');
  const v1Source = await readFile(path.join(v1Root, 'src', 'workflows', 'prompt-workflow.ts'), 'utf8');
  if (v1Source.includes(ASK_BATCH_BEFORE_NEW_KEY)) throw new Error(`${v1Commit} already has the patch`);
  [v1Bundle, v2Bundle] = await Promise.all([
    bundleWorkflowCode({ workflowsPath: path.join(v1Root, 'src', 'workflows'), logger: quietLogger }),
    bundleWorkflowCode({ workflowsPath, logger: quietLogger }),
  ]);
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 100, maxMs: 300 }, runningMs: { minMs: 800, maxMs: 1600 } },
    limits: { minPollIntervalMs: 300, accountConcurrency: null },
  });
  connection = await Connection.connect({ address: server.address });
  native = await NativeConnection.connect({ address: server.address });
}, 240_000);

afterAll(async () => {
  await native?.close();
  await connection?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a new worker version in the middle of a batch', () => {
  it('v1 shuts down gracefully with rows in flight, v2 with a patch() change finishes the batch', async () => {
    const client = new Client({ connection: connection! });
    const taskQueue = `upgrade-${randomUUID()}`;
    const batchId = `upgrade${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    const rowIds = await writeBatchCsv(file, ROWS);
    // One store for both versions, as one deployment has.
    const ledger = await tempLedger();
    // Every third row's first creation fails, refunded: the row tries a new key, the patched path.
    for (let n = 3; n <= ROWS; n += 3) {
      sim!.scriptFor(`a watercolour harbour at dawn, number ${n}`, [{ kind: FaultKind.FailGeneration }]);
    }
    const newWorker = (identity: string, workflowBundle: WorkflowBundleWithSourceMap): Promise<Worker> =>
      createWorker({
        connection: native!,
        taskQueue,
        identity,
        workflowBundle,
        shutdownGraceTimeMs: DEFAULT_SHUTDOWN_GRACE_MS,
        activityDeps: {
          config: defaultServiceConfig({ baseUrl: sim!.baseUrl, minPollIntervalMs: 300 }),
          apiKey: () => DEMO_API_KEY,
          outputRoot: dir,
          temporalClient: client,
          ledger,
        },
      });

    const v1 = await newWorker(V1, v1Bundle);
    const v1Run = v1.run();
    const handle = await client.workflow.start(batchWorkflow, {
      taskQueue,
      workflowId: batchWorkflowId(batchId),
      args: [{ batchId, file, outDir: 'out', concurrency: 6 }],
    });
    // Mid-batch: a third of the rows done, others in flight.
    const atSwitch = await waitUntil(
      'a third of the rows on v1',
      async () => {
        const p = await handle.query(progressQuery);
        return p.counts.succeeded >= ROWS / 3 && p.inFlight > 0 ? p : undefined;
      },
      120_000,
    );
    const tSwitch = Date.now();
    v1.shutdown();
    await within('v1 graceful shutdown', 60_000, v1Run);
    const shutdownMs = Date.now() - tSwitch;

    const v2 = await newWorker(V2, v2Bundle);
    const [progress, outcomes] = await v2.runUntil(async () => {
      const ended = await within('the batch on v2', 180_000, handle.result());
      return [ended, await rowOutcomes(client, batchId, rowIds)] as const;
    });
    const v2Ms = Date.now() - tSwitch - shutdownMs;

    // Every row succeeded once, with its images on disk as recorded.
    expect(progress.counts.succeeded).toBe(ROWS);
    expect(outcomes.filter((o) => o.result?.state !== 'succeeded').map((o) => o.rowId)).toEqual([]);
    for (const o of outcomes) {
      for (const image of o.result?.images ?? []) {
        expect(await sha256Of(path.join(dir, 'out', image.path))).toBe(image.sha256);
      }
    }
    expect(sim!.charges.violations().chargedTwice).toEqual([]);
    expect(sim!.charges.byCreation().filter((c) => c.netUsd > 0)).toHaveLength(ROWS);
    const retried = outcomes.filter((o) => (o.result?.keys.length ?? 0) > 1);
    expect(retried.length).toBeGreaterThan(0);

    // Who ran what: no workflow task failed anywhere (no nondeterminism), old rows kept the old path.
    const batch = await describeHistory(client, batchWorkflowId(batchId));
    expect(batch.failedTasks).toEqual([]);
    expect(batch.identities).toEqual(new Set([V1, V2]));
    const rows = await Promise.all(rowIds.map((id) => describeHistory(client, `${batchId}/${id}`)));
    expect(rows.flatMap((r) => r.failedTasks)).toEqual([]);
    const startedOn = (r: HistoryFacts) => r.firstIdentity;
    const v1Rows = rows.filter((r) => startedOn(r) === V1);
    const v2Rows = rows.filter((r) => startedOn(r) === V2);
    const handedOver = v1Rows.filter((r) => r.identities.has(V2));
    const patchedRows = rows.filter((r) => r.patched);
    console.log(
      `[version-upgrade] v1 = ${v1Commit.slice(0, 10)} (before ${ASK_BATCH_BEFORE_NEW_KEY}); switched at ` +
        `${atSwitch.counts.succeeded} succeeded, ${atSwitch.inFlight} in flight; rows started on v1 ${v1Rows.length} ` +
        `(${handedOver.length} finished on v2), on v2 ${v2Rows.length}; rows with a new key ${retried.length}, ` +
        `on the patched path ${patchedRows.length}; v1 shut down in ${shutdownMs} ms, v2 finished in ` +
        `${(v2Ms / 1000).toFixed(1)} s`,
    );
    expect(v1Rows.length + v2Rows.length).toBe(ROWS);
    expect(handedOver.length).toBeGreaterThan(0);
    expect(v2Rows.length).toBeGreaterThan(0);
    // v1 never took the new path; every new key v2 started (a row of v2 with a second key) took it.
    expect(rows.filter((r) => r.patched && !r.identities.has(V2)).map((r) => r.workflowId)).toEqual([]);
    const v2Retried = v2Rows.filter((r) => r.keys > 1);
    expect(v2Retried.filter((r) => !r.patched).map((r) => r.workflowId)).toEqual([]);
    expect(patchedRows.length).toBeGreaterThan(0);
  }, 480_000);
});

interface HistoryFacts {
  workflowId: string;
  /** Identity of the worker that completed the first workflow task. */
  firstIdentity: string | undefined;
  identities: Set<string>;
  /** Causes of failed workflow tasks (a nondeterminism error would be one). */
  failedTasks: string[];
  /** Whether the `ask-batch-before-new-key` patch marker is in the history. */
  patched: boolean;
  /** Keys the row tried (createImage activities with distinct inputs are not told apart: scheduled ones). */
  keys: number;
}

const UNHANDLED_COMMAND = temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND;

async function describeHistory(client: Client, workflowId: string): Promise<HistoryFacts> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const identities: string[] = [];
  const failedTasks: string[] = [];
  let patched = false;
  let keys = 0;
  for (const e of history.events ?? []) {
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'createImage') keys += 1;
    const done = e.workflowTaskCompletedEventAttributes;
    if (done?.identity) identities.push(done.identity);
    const failed = e.workflowTaskFailedEventAttributes;
    // UNHANDLED_COMMAND is the server asking the worker to redo a task that tried to close the workflow while
    // new events (row reports) were arriving: routine, and not a fault of the workflow code.
    if (failed && failed.cause !== UNHANDLED_COMMAND) {
      failedTasks.push(`${workflowId}: ${String(failed.cause)} ${failed.failure?.message ?? ''}`);
    }
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_patch') {
      const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
      if (data && Buffer.from(data).toString('utf8').includes(`"${ASK_BATCH_BEFORE_NEW_KEY}"`)) patched = true;
    }
  }
  return { workflowId, firstIdentity: identities[0], identities: new Set(identities), failedTasks, patched, keys };
}

/** The commit just before the one that introduced the patch `patchId` into the workflow code. */
function commitBeforePatch(patchId: string): string {
  let introducing: string | undefined;
  try {
    const log = execFileSync('git', ['log', '--format=%H', '-S', `'${patchId}'`, '--', 'src/workflows'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    introducing = log.trim().split('\n').filter(Boolean).at(-1);
  } catch (err) {
    throw new Error(`this test needs the git history of the repository (git log failed: ${String(err)})`);
  }
  if (!introducing) {
    throw new Error(`no commit introduces '${patchId}' in src/workflows: this test needs the full git history`);
  }
  try {
    return execFileSync('git', ['rev-parse', `${introducing}^`], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  } catch (err) {
    throw new Error(`the parent of ${introducing} is not in this clone (shallow?): ${String(err)}`);
  }
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };
