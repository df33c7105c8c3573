import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareBatch, startOrAttachBatch } from '../../src/cli/batches';
import type { LedgerStore } from '../../src/ledger';
import { startSimulator, type Simulator } from '../../src/simulator';
import { cancelSignal, progressQuery, resumeSignal, type batchWorkflow } from '../../src/workflows';
import { tempLedger } from '../helpers/ledger';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * A worker on another ledger store than its batch's refuses the batch's rows, and its message says which side to
 * change, naming the batch's store first (issue 43, point 2). Each message is followed as it reads, and the
 * simulator's charge book shows that following it pays nothing again. A tester restarted the worker on the CLI's
 * store, as the old message read, and resume paid 5 requests again; the other fix left the batch paused for good.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
let sim: Simulator;
const stores: LedgerStore[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-other-store-'));
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function store(): Promise<LedgerStore> {
  const s = await tempLedger();
  stores.push(s);
  return s;
}

/** A file of three rows whose prompts say `what`, and the options of a batch of it. */
async function batchOf(what: string, batchId: string) {
  const file = path.join(dir, `${batchId}.csv`);
  await writeFile(file, `id,prompt,model\na,${what} one,sdxl\nb,${what} two,sdxl\nc,${what} three,sdxl\n`);
  return { batchId, file, outDir: path.join(dir, 'out', batchId) };
}

/** Runs a batch on `ledger` to its end. */
async function runOn(ledger: LedgerStore, taskQueue: string, options: Awaited<ReturnType<typeof batchOf>>) {
  const { handle } = await startOrAttachBatch({
    client: env().client,
    taskQueue,
    ledger,
    prepared: await prepareBatch(options),
  });
  return handle.result();
}

/** The batch's stop message, once its rows were refused. */
async function stopMessage(handle: WorkflowHandle<typeof batchWorkflow>): Promise<string> {
  for (let i = 0; i < 150; i++) {
    const p = await handle.query(progressQuery);
    if (p.waiting?.kind === 'batch_stop') return p.waiting.details.message;
    await sleep(100);
  }
  throw new Error('the batch never stopped');
}

const charges = () => sim.charges.byCreation().length;

/** A worker on `ledger`, on a new task queue or the one given. */
const workerOn = (ledger: LedgerStore, taskQueue?: string) =>
  simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: dir,
    prefix: 'other-store',
    ledger,
    ...(taskQueue ? { taskQueue } : {}),
  });

describe("a worker whose store is not its batch's", { timeout: 120_000 }, () => {
  it("the worker's store knows more: cancel, a new batch on it, and nothing is paid again", async () => {
    const workerStore = await store();
    const { worker, taskQueue } = await workerOn(workerStore);
    const commandStore = await store();
    await worker.runUntil(async () => {
      await runOn(workerStore, taskQueue, await batchOf('a heron at dawn', `a0${randomUUID().slice(0, 6)}`));
      const paid = charges();
      const options = await batchOf('a heron at dawn', `a1${randomUUID().slice(0, 6)}`);
      // The command on a new, empty store: the batch is recorded there.
      const { handle } = await startOrAttachBatch({
        client: env().client,
        taskQueue,
        ledger: commandStore,
        prepared: await prepareBatch(options),
      });
      const message = await stopMessage(handle);
      expect(message).toMatch(
        new RegExp(`^batch ${options.batchId} was started on the ledger store ${commandStore.location} \\(0 keys\\)`),
      );
      const advice =
        `imagebatch cancel ${options.batchId}, then run the file again as a new batch ` +
        `(--batch-id ${options.batchId}-2) with IMAGEBATCH_LEDGER=${workerStore.location}`;
      expect(message).toContain(advice);
      expect(message).not.toContain('may be paid again');
      // As it reads: cancel, then the file as a new batch on the worker's store.
      await handle.signal(cancelSignal);
      await handle.result();
      const again = await runOn(workerStore, taskQueue, { ...options, batchId: `${options.batchId}-2` });
      expect(again.counts, JSON.stringify(again)).toMatchObject({ reused: 3 });
      expect(charges()).toBe(paid);
    });
  });

  it("the batch's store knows more: restart the worker on it, resume, and nothing is paid again", async () => {
    const batchStore = await store();
    const first = await workerOn(batchStore);
    const paidBefore = await first.worker.runUntil(async () => {
      await runOn(batchStore, first.taskQueue, await batchOf('a fox in snow', `b0${randomUUID().slice(0, 6)}`));
      return charges();
    });
    // A worker on a new, empty store joins the queue.
    const emptyStore = await store();
    const wrong = await workerOn(emptyStore, first.taskQueue);
    const options = await batchOf('a fox in snow', `b1${randomUUID().slice(0, 6)}`);
    const { handle } = await startOrAttachBatch({
      client: env().client,
      taskQueue: first.taskQueue,
      ledger: batchStore,
      prepared: await prepareBatch(options),
    });
    const message = await wrong.worker.runUntil(() => stopMessage(handle));
    expect(message).toMatch(
      new RegExp(`^batch ${options.batchId} was started on the ledger store ${batchStore.location} \\(\\d+ keys\\)`),
    );
    expect(message).toContain(
      `Restart this worker with IMAGEBATCH_LEDGER=${batchStore.location}, then imagebatch resume ${options.batchId}`,
    );
    expect(charges()).toBe(paidBefore);
    // As it reads: the worker on the batch's store, then resume.
    const right = await workerOn(batchStore, first.taskQueue);
    const done = await right.worker.runUntil(async () => {
      await handle.signal(resumeSignal, {});
      return handle.result();
    });
    expect(done.counts).toMatchObject({ reused: 3 });
    expect(charges()).toBe(paidBefore);
  });
});
