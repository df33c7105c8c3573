import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities';
import { startOrAttachBatch } from '../../src/cli/batches';
import { defaultServiceConfig } from '../../src/config/service-config';
import { DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import {
  cancelSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  rowWaitingSignal,
  type batchWorkflow,
} from '../../src/workflows';
import { batchWorkflowId, parseIdempotencyKey, type BatchProgress } from '../../src/model';
import { runs } from '../fuzz/runs';
import { createLocalEnv, useTestEnv, workflowBundle } from '../helpers/temporal';
import { WorkerProcess, ensureDistIsFresh, within } from './helpers';
import { defaultLedger, tempLedger } from '../helpers/ledger';

/**
 * The spend cap, as a property over generated batches (fast-check; each case is a real batch on the dev server
 * against the simulator, a few seconds): model prices, rows and their images, `--concurrency` 1 to 32, fault rates
 * and the cap itself. While the batch runs, every ~100 ms, the batch's progress and the simulator's net charge under
 * the batch's keys are sampled, and at every sample
 *
 * - spent plus reserved (the progress) never passes the cap, and
 * - the simulator's net for the batch never passes the cap;
 *
 * when the batch holds on its cap, the next row really would not fit (it does not stop early); and at the end, the
 * simulator's net is within the cap and equal to the batch's spend (when every row's spend is known). Three ways:
 * the cap given at the start, the cap set by `resumeSignal` on a running batch, and a worker SIGKILLed in the middle.
 * (The resume case pauses the batch first and reads what it has committed, then resumes with that plus a generated
 * budget as the cap: without the pause, rows started between the read and the signal could legitimately hold more
 * than the new cap, which no cap can take back.)
 *
 * A failure prints fast-check's seed and the case; `IMAGEBATCH_SPEND_CAP_SEED=<seed>` runs the same cases again (their
 * timing, and so the simulator's fault rolls, still differ), `IMAGEBATCH_FUZZ_SCALE=<n>` runs n times as many.
 */

const env = useTestEnv(() => createLocalEnv());
let dir: string;

const SEED = Number(process.env.IMAGEBATCH_SPEND_CAP_SEED ?? Math.floor(Math.random() * 2 ** 31));
/** Tolerance of the comparisons with the cap, as the batch's own (`<= cap + 1e-9`). */
const EPS = 1e-9;
/** Tolerance of money compared between the batch and the simulator (both are rounded to micro-dollars). */
const MONEY_EPS = 1e-6;
const SAMPLE_EVERY_MS = 100;
/** A batch that answers no progress query for this long fails the case (the worker outage included). */
const NO_ANSWER_MS = 45_000;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-spend-cap-'));
  await workflowBundle();
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** One generated batch. */
interface CapCase {
  simSeed: number;
  /** Price per image of each model, in cents. */
  centsPerImage: number[];
  /** Rows of the file: the model (an index into `centsPerImage`, modulo its length) and `num_images`. */
  rows: { model: number; images: number }[];
  concurrency: number;
  /**
   * The cap, in percent: of the file's full cost (cap given at the start), or of what the rows not started yet
   * would cost, on top of what the batch has committed (cap set by resume).
   */
  capPercent: number;
  /** Fault rates of the simulator, in percent. */
  faultPercent: { failed502: number; unavailable503: number; failGeneration: number };
  /** Once held by its cap, let the rows in flight end before cancelling (else cancel them in flight). */
  drainBeforeCancel: boolean;
  /** Rows ended before the cap is set (resume). */
  afterRowsEnded: number;
  /** Milliseconds from the first rows' start to the worker's SIGKILL (kill). */
  killAfterMs: number;
}

function caseArb(o: {
  concurrency: { min: number; max: number };
  capPercent: { min: number; max: number };
  afterRowsEnded: { min: number; max: number };
}): fc.Arbitrary<CapCase> {
  const percent = fc.integer({ min: 0, max: 5 });
  return fc.record({
    simSeed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    centsPerImage: fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 2, maxLength: 3 }),
    rows: fc.array(fc.record({ model: fc.nat({ max: 2 }), images: fc.integer({ min: 1, max: 3 }) }), {
      minLength: 20,
      maxLength: 40,
    }),
    // The extremes (1 and 32) in a quarter of the cases; 1 is the slow one (a row at a time).
    concurrency: fc.oneof(
      { weight: 1, arbitrary: fc.constantFrom(o.concurrency.min, o.concurrency.max) },
      { weight: 3, arbitrary: fc.integer(o.concurrency) },
    ),
    capPercent: fc.integer(o.capPercent),
    faultPercent: fc.record({ failed502: percent, unavailable503: percent, failGeneration: percent }),
    drainBeforeCancel: fc.boolean(),
    afterRowsEnded: fc.integer(o.afterRowsEnded),
    killAfterMs: fc.integer({ min: 0, max: 1_000 }),
  });
}

const roundUsd = (n: number) => Math.round(n * 1e6) / 1e6;
const modelId = (i: number) => `model-${i}`;
const modelOf = (c: CapCase, row: CapCase['rows'][number]) => row.model % c.centsPerImage.length;
/** Each row's list price, as the batch reserves it: the catalog's price per image times its images. */
const rowPrices = (c: CapCase) => c.rows.map((r) => roundUsd((c.centsPerImage[modelOf(c, r)]! / 100) * r.images));
const sumUsd = (xs: number[]) => roundUsd(xs.reduce((a, b) => a + b, 0));
const ended = (p: BatchProgress) => Object.values(p.counts).reduce((a, b) => a + b, 0);

function describeCase(c: CapCase, mode: Mode): string {
  const prices = rowPrices(c);
  return (
    `${c.rows.length} rows (${sumUsd(prices)} USD in all), models ${c.centsPerImage.map((x) => x / 100).join('/')} ` +
    `USD per image, concurrency ${c.concurrency}, cap ${c.capPercent}%, faults ${JSON.stringify(c.faultPercent)}, ` +
    `${c.drainBeforeCancel ? 'drain' : 'cancel in flight'}, ` +
    (mode === 'resume' ? `cap after ${c.afterRowsEnded} rows, ` : '') +
    (mode === 'kill' ? `kill after ${c.killAfterMs} ms, ` : '') +
    `sim seed ${c.simSeed}`
  );
}

async function startCaseSimulator(c: CapCase): Promise<Simulator> {
  return startSimulator({
    seed: c.simSeed,
    models: c.centsPerImage.map((cents, i) => ({ id: modelId(i), name: `Model ${i}`, price_usd: cents / 100 })),
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 300 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 500, burst: 500, accountConcurrency: null },
    faults: {
      probabilities: {
        [FaultKind.GenerationFailed]: c.faultPercent.failed502 / 100,
        [FaultKind.ProviderUnavailable]: c.faultPercent.unavailable503 / 100,
        [FaultKind.FailGeneration]: c.faultPercent.failGeneration / 100,
      },
      providerRetryAfterSeconds: 1,
    },
  });
}

async function writeCaseFile(folder: string, c: CapCase): Promise<string> {
  const file = path.join(folder, 'prompts.csv');
  const lines = [
    'id,prompt,model,num_images',
    ...c.rows.map(
      (r, i) =>
        `r${String(i + 1).padStart(2, '0')},"a watercolour harbour at dawn, number ${i + 1}",` +
        `${modelId(modelOf(c, r))},${r.images}`,
    ),
  ];
  await writeFile(file, `${lines.join('\n')}\n`);
  return file;
}

/** The simulator's net charge (charged less refunded) under the keys of this batch. */
function simulatorNet(sim: Simulator, batchId: string): number {
  let net = 0;
  for (const c of sim.charges.byCreation()) {
    if (parseIdempotencyKey(c.idempotencyKey ?? '')?.batchId === batchId) net += c.netUsd;
  }
  return roundUsd(net);
}

type BatchHandle = WorkflowHandle<typeof batchWorkflow>;

/** What a case saw, for the log line. */
interface CaseReport {
  samples: number;
  netSamples: number;
  maxNet: number;
  held: boolean;
  cap: number | undefined;
  final: BatchProgress;
  finalNet: number;
  seconds: number;
  notes: string[];
}

/** The sampling of one batch: the cap to check against (undefined: none yet), the last answer, what broke. */
class Watch {
  cap: number | undefined;
  last: BatchProgress | undefined;
  lastAnswerAt = Date.now();
  /** Progress answers, and simulator samples. */
  samples = 0;
  netSamples = 0;
  maxNet = 0;
  readonly violations: string[] = [];
  /** No progress query is sent while set (see `awaitTakeover`). */
  queriesHeld = false;
  private readonly t0 = Date.now();

  constructor(
    private readonly sim: Simulator,
    private readonly batchId: string,
    private readonly prices: number[],
  ) {}

  at(): string {
    return `${((Date.now() - this.t0) / 1000).toFixed(2)} s`;
  }

  violation(what: string, p?: BatchProgress): void {
    const seen = p ? ` (progress: ${JSON.stringify(p)})` : '';
    this.violations.push(
      `progress sample ${this.samples}, net sample ${this.netSamples} at ${this.at()}, cap ${this.cap}: ${what}${seen}`,
    );
  }

  /** One sample of the simulator's net under the batch's keys, against the cap. */
  sampleNet(): void {
    const cap = this.cap;
    const net = simulatorNet(this.sim, this.batchId);
    this.maxNet = Math.max(this.maxNet, net);
    this.netSamples += 1;
    if (cap !== undefined && net > cap + EPS) this.violation(`the simulator's net ${net} USD passed the cap ${cap}`);
  }

  /** One sample of the batch's progress, against the cap; none while no worker answers (killed). */
  async sampleProgress(handle: BatchHandle): Promise<void> {
    const cap = this.cap;
    if (this.queriesHeld) {
      this.lastAnswerAt = Date.now();
      return;
    }
    let p: BatchProgress;
    try {
      p = await within('a progress query', 5_000, handle.query(progressQuery));
    } catch {
      return;
    }
    this.samples += 1;
    this.last = p;
    this.lastAnswerAt = Date.now();
    if (cap !== undefined) this.checkProgress(p, cap);
  }

  checkProgress(p: BatchProgress, cap: number): void {
    const committed = roundUsd(p.spentUsd + p.reservedUsd);
    if (p.spentUsd + p.reservedUsd > cap + EPS) {
      this.violation(`spent ${p.spentUsd} + reserved ${p.reservedUsd} = ${committed} USD passed the cap ${cap}`, p);
    }
    if (p.spendCapUsd !== undefined && p.spendCapUsd !== cap) {
      this.violation(`the batch says its cap is ${p.spendCapUsd}, not ${cap}`, p);
    }
    if (p.spendCapUsd !== undefined && p.unknownSpendRows === 0) {
      const left = Math.max(0, roundUsd(cap - committed));
      if (Math.abs((p.leftUsd ?? NaN) - left) > MONEY_EPS) this.violation(`left ${p.leftUsd} USD, not ${left}`, p);
    }
    // Held by the cap: the next row must really not fit (as the batch saw it when it held), or the cap stops early.
    const w = p.waiting;
    if (w?.kind === 'spend_cap' && p.unknownSpendRows === 0 && p.started < this.prices.length) {
      const next = this.prices[p.started]!;
      if (w.spentUsd + w.reservedUsd + next <= cap - MONEY_EPS) {
        this.violation(
          `held by the cap though the next row (${next} USD) fits: spent ${w.spentUsd} + reserved ${w.reservedUsd}`,
          p,
        );
      }
      if (w.capUsd !== cap) this.violation(`held by a cap of ${w.capUsd}, not ${cap}`, p);
    }
  }

  /**
   * Samples every SAMPLE_EVERY_MS until `stop()` is called: the simulator's net and the progress in two loops, so
   * that a query nobody answers (the worker killed) does not slow the simulator's side.
   */
  start(handle: BatchHandle): { stop: () => Promise<void> } {
    let stopped = false;
    const every = async (fn: () => void | Promise<void>) => {
      while (!stopped) {
        await fn();
        await sleep(SAMPLE_EVERY_MS);
      }
    };
    const loops = Promise.all([every(() => this.sampleNet()), every(() => this.sampleProgress(handle))]);
    return {
      stop: async () => {
        stopped = true;
        await loops;
      },
    };
  }

  /** Waits, bounded by `deadline`, until the latest progress satisfies `pred`; a fresh answer is required. */
  async until(what: string, deadline: number, pred: (p: BatchProgress) => boolean): Promise<BatchProgress> {
    for (;;) {
      if (this.last && pred(this.last)) return this.last;
      const now = Date.now();
      if (now > deadline || now - this.lastAnswerAt > NO_ANSWER_MS) {
        const silent = now - this.lastAnswerAt > NO_ANSWER_MS ? ' (no progress answer for too long)' : '';
        throw new Error(`${what}: not within the case's time${silent}; last progress ${JSON.stringify(this.last)}`);
      }
      await sleep(25);
    }
  }
}

/**
 * After the kill, no progress query until the new worker (`pid`) has completed a workflow task of the batch: a signal
 * the batch ignores makes one. A query that reaches the dead worker's sticky queue is handed to the new worker as a
 * legacy query, and with SDK 1.24 that query's replay ran the workflow code on a signal recorded after the last
 * completed task (the batch's cancel), which the next task then completed with commands a replay does not give
 * (a nondeterminism error; docs/known-issues.md). That is the SDK's to fix, not this test's subject (the cap
 * through a kill), so this test waits it out; `imagebatch status` meets it only in the same window.
 */
async function awaitTakeover(handle: BatchHandle, pid: number, deadline: number): Promise<string> {
  const t = Date.now();
  // A batch that has already ended takes no signal; it is seen ended below.
  await handle.signal(rowWaitingSignal, 'spend-cap-test-takeover').catch(() => undefined);
  for (;;) {
    const history = await handle.fetchHistory();
    const byNew = (history.events ?? []).some(
      (e) =>
        e.workflowTaskCompletedEventAttributes?.identity?.startsWith(`${pid}@`) === true ||
        e.workflowExecutionCompletedEventAttributes != null,
    );
    if (byNew) return `the new worker took the batch over after ${Date.now() - t} ms`;
    if (Date.now() > deadline) throw new Error('the new worker did not take the batch over within the case');
    await sleep(250);
  }
}

/** Held by the cap: waiting `spend_cap`, or paused by the cap (the pause it leaves behind once woken). */
const heldByCap = (p: BatchProgress) =>
  p.waiting?.kind === 'spend_cap' || (p.waiting?.kind === 'paused' && p.waiting.reason.startsWith('spend cap of'));

type Mode = 'cap' | 'resume' | 'kill';

/**
 * Drives one batch to its end while sampling it: (resume) sets a cap once a few rows ended; (kill) kills and
 * replaces the worker once a few rows ended; waits until the cap holds the batch (or every row ended), then,
 * drained or not, cancels it and checks the final figures. Throws with every violation seen.
 */
async function driveBatch(o: {
  handle: BatchHandle;
  sim: Simulator;
  batchId: string;
  c: CapCase;
  mode: Mode;
  cap: number | undefined;
  budgetMs: number;
  killWorker?: () => Promise<{ note: string; pid: number }>;
}): Promise<CaseReport> {
  const { handle, sim, batchId, c } = o;
  const t0 = Date.now();
  const deadline = t0 + o.budgetMs;
  const prices = rowPrices(c);
  const rows = c.rows.length;
  const allEnded = (p: BatchProgress) => ended(p) >= rows;
  const w = new Watch(sim, batchId, prices);
  w.cap = o.cap;
  const notes: string[] = [];
  const sampler = w.start(handle);
  let final: BatchProgress;
  let held = false;
  try {
    if (o.mode === 'resume') {
      const p0 = await w.until('rows ending before the cap is set', deadline, (p) => ended(p) >= c.afterRowsEnded);
      if (allEnded(p0)) throw new Error('every row ended before the cap could be set (the case is too small)');
      // Paused first, so that nothing starts between reading what is committed and the cap arriving: while paused,
      // spent + reserved only goes down (a row's end replaces its reservation by its net, at most as much).
      await handle.signal(pauseSignal, 'the property test sets a cap');
      let paused: BatchProgress | undefined;
      while (!paused) {
        if (Date.now() > deadline) throw new Error('the batch did not pause');
        const p = await within('a progress query', 5_000, handle.query(progressQuery));
        if (p.status === 'paused') paused = p;
        else await sleep(25);
      }
      if (paused.unknownSpendRows !== 0)
        throw new Error(`rows of unknown spend before the cap: ${paused.unknownSpendRows}`);
      const committed = roundUsd(paused.spentUsd + paused.reservedUsd);
      const budget = Math.round(sumUsd(prices.slice(paused.started)) * c.capPercent) / 100;
      const cap = roundUsd(committed + budget);
      await handle.signal(resumeSignal, { spendCapUsd: cap });
      w.cap = cap;
      notes.push(
        `cap ${cap} set by resume after ${ended(paused)} rows ended, ${paused.started} started (${committed} committed)`,
      );
    }
    if (o.mode === 'kill') {
      // Early, while the first rows are at the service (a later kill would often meet a batch already held).
      await w.until('the first rows starting', deadline, (x) => x.started > 0);
      await sleep(c.killAfterMs);
      const p = await within('a progress query', 5_000, handle.query(progressQuery)).catch(() => undefined);
      const at = p ? `${ended(p)} rows ended, ${p.inFlight} in flight` : 'no progress answer';
      w.queriesHeld = true;
      const killed = await o.killWorker!();
      notes.push(`${killed.note} (at ${at}); ${await awaitTakeover(handle, killed.pid, deadline)}`);
      w.queriesHeld = false;
    }
    const stopAt = await w.until('the cap holding the batch, or every row ending', deadline, (p) => {
      return (w.cap !== undefined && heldByCap(p)) || allEnded(p);
    });
    held = !allEnded(stopAt);
    if (held && c.drainBeforeCancel) await w.until('the rows in flight ending', deadline, (p) => p.inFlight === 0);
    if (held) await handle.signal(cancelSignal, 'the property test is done');
    final = await within('the batch result', Math.max(1_000, deadline - Date.now()), handle.result());
  } finally {
    await sampler.stop();
  }
  await replayBatch(handle, notes);

  // Creations still at the service (rows cancelled in flight) end, so that the ledger is final.
  for (let i = 0; i < 40 && sim.stats().inFlight > 0; i++) await sleep(250);
  const finalNet = simulatorNet(sim, batchId);
  const cap = w.cap;
  if (cap !== undefined) {
    w.checkProgress(final, cap);
    if (finalNet > cap + EPS) w.violation(`the final simulator net ${finalNet} USD passed the cap ${cap}`);
  }
  if (final.reservedUsd !== 0 || final.inFlight !== 0) w.violation('the ended batch still reserves', final);
  if (ended(final) !== rows) w.violation(`${ended(final)} rows counted of ${rows}`, final);
  if (final.status !== (held ? 'cancelled' : 'completed')) w.violation(`ended ${final.status}`, final);
  if (final.unknownSpendRows === 0) {
    if (final.counts.cancelled === 0) {
      if (Math.abs(finalNet - final.spentUsd) > MONEY_EPS) {
        w.violation(`the simulator's net ${finalNet} USD is not the batch's spend ${final.spentUsd}`, final);
      }
    } else if (finalNet > final.spentUsd + MONEY_EPS) {
      // A row cancelled in flight counts its charge; the service may still refund it, never charge more.
      w.violation(`the simulator's net ${finalNet} USD is above the batch's spend ${final.spentUsd}`, final);
    }
  }
  if (w.violations.length > 0) {
    const shown = w.violations.slice(0, 5).join('\n  ');
    throw new Error(
      `${w.violations.length} violation(s) in ${o.mode} case (${describeCase(c, o.mode)}; batch ${batchId}; ` +
        `${notes.join('; ')}):\n  ${shown}`,
    );
  }
  return {
    samples: w.samples,
    netSamples: w.netSamples,
    maxNet: w.maxNet,
    held,
    cap,
    final,
    finalNet,
    seconds: (Date.now() - t0) / 1000,
    notes,
  };
}

/**
 * The batch's history, replayed with today's workflow code: a run that took a path a replay would not (a worker's
 * cache evicted later would fail the workflow task) fails the case here, whether or not a worker happened to replay.
 */
async function replayBatch(handle: BatchHandle, notes: string[]): Promise<void> {
  const history = await handle.fetchHistory();
  try {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, handle.workflowId);
  } catch (err) {
    const file = await saveHistory(handle);
    throw new Error(
      `the batch's history does not replay (${err instanceof Error ? err.message : String(err)}); history: ${file}; ` +
        notes.join('; '),
    );
  }
}

/**
 * Saves the batch's history (the replay test's JSON form) for a look after a failure; answers the file's path and
 * the events in one line each (`id type`), so that a CI log shows the history too.
 */
async function saveHistory(handle: WorkflowHandle): Promise<string> {
  const history = await handle.fetchHistory();
  const file = path.join(
    os.tmpdir(),
    `imagebatch-history-${handle.workflowId.replace(/[^A-Za-z0-9_-]/g, '_')}-${Date.now()}.json`,
  );
  await writeFile(file, JSON.stringify(history));
  const events = (history.events ?? []).map((e) => `${String(e.eventId)} ${String(e.eventType)}`);
  return `${file}\n${events.join('\n')}`;
}

function logCase(mode: Mode, n: number, c: CapCase, r: CaseReport): void {
  console.log(
    `[spend-cap] ${mode} #${n}: ${describeCase(c, mode)} -> cap ${r.cap}; ${r.held ? 'held by the cap' : 'every row ended'}` +
      ` after ${r.final.started} started; spent ${r.final.spentUsd}, max net ${r.maxNet}, final net ${r.finalNet}; ` +
      `${r.final.unknownSpendRows} unknown; ${r.samples} progress and ${r.netSamples} simulator samples; ${r.seconds.toFixed(1)} s` +
      (r.notes.length ? `; ${r.notes.join('; ')}` : ''),
  );
}

/** A case on a worker in this process (cap at the start, or by resume). */
async function inProcessCase(c: CapCase, mode: 'cap' | 'resume', budgetMs: number): Promise<CaseReport> {
  const sim = await startCaseSimulator(c);
  const folder = await mkdtemp(path.join(dir, `${mode}-`));
  try {
    const file = await writeCaseFile(folder, c);
    const taskQueue = `spend-cap-${randomUUID()}`;
    const batchId = `cap${randomUUID().slice(0, 8)}`;
    const cap = mode === 'cap' ? Math.round(sumUsd(rowPrices(c)) * c.capPercent) / 100 : undefined;
    const ledger = await tempLedger();
    const worker = await Worker.create({
      connection: env().nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: createActivities({
        config: defaultServiceConfig({ baseUrl: sim.baseUrl, minPollIntervalMs: 200 }),
        apiKey: () => DEMO_API_KEY,
        outputRoot: folder,
        temporalClient: env().client,
        ledger,
      }),
    });
    return await worker.runUntil(async () => {
      const { handle } = await startOrAttachBatch({
        ledger,
        client: env().client,
        taskQueue,
        batchId,
        file,
        outDir: path.join(folder, 'out'),
        concurrency: c.concurrency,
        ...(cap === undefined ? {} : { spendCapUsd: cap }),
      });
      return driveBatch({ handle, sim, batchId, c, mode, cap, budgetMs });
    });
  } finally {
    await sim.close();
  }
}

/** A case on `imagebatch worker` child processes: the first is SIGKILLed mid-batch and another started. */
async function killCase(c: CapCase, budgetMs: number): Promise<CaseReport> {
  const sim = await startCaseSimulator(c);
  const folder = await mkdtemp(path.join(dir, 'kill-'));
  const taskQueue = `spend-cap-${randomUUID()}`;
  const batchId = `cap${randomUUID().slice(0, 8)}`;
  const startWorker = () =>
    WorkerProcess.start({
      outputRoot: folder,
      readyTimeoutMs: 60_000,
      env: {
        TEMPORAL_ADDRESS: env().address,
        TEMPORAL_TASK_QUEUE: taskQueue,
        IMAGEGEN_BASE_URL: sim.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
      },
    });
  const workers: WorkerProcess[] = [];
  try {
    const file = await writeCaseFile(folder, c);
    const cap = Math.round(sumUsd(rowPrices(c)) * c.capPercent) / 100;
    workers.push(await startWorker());
    // The store the worker processes use (this file's default): the batch is recorded where they look.
    const ledger = await defaultLedger();
    const { handle } = await startOrAttachBatch({
      ledger,
      client: env().client,
      taskQueue,
      batchId,
      file,
      outDir: path.join(folder, 'out'),
      concurrency: c.concurrency,
      spendCapUsd: cap,
    });
    const killWorker = async () => {
      const t = Date.now();
      await workers.at(-1)!.kill();
      workers.push(await startWorker());
      const pid = workers.at(-1)!.pid!;
      return { note: `worker SIGKILLed and another started in ${Date.now() - t} ms`, pid };
    };
    return await driveBatch({ handle, sim, batchId, c, mode: 'kill', cap, budgetMs, killWorker });
  } catch (err) {
    const logs = workers.map((w, i) => `worker ${i + 1}:\n${w.output().slice(-4_000)}`).join('\n');
    const saved = await saveHistory(env().client.workflow.getHandle(batchWorkflowId(batchId))).catch(String);
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nbatch history: ${saved}\n${logs}`);
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await sim.close();
  }
}

function property(mode: Mode, arb: fc.Arbitrary<CapCase>, run: (c: CapCase) => Promise<CaseReport>) {
  let n = 0;
  return fc.asyncProperty(arb, async (c) => {
    n += 1;
    logCase(mode, n, c, await run(c));
  });
}

/** Each case a real batch: few of them, no shrinking (a failure prints its seed and its case as found). */
function options(numRuns: number): fc.Parameters<[CapCase]> {
  return { seed: SEED, numRuns, endOnFailure: true };
}

// The three properties run at once: each case has its own simulator, task queue, worker and batch, and spends its
// time waiting for the simulator's generations; the checks are per sample, not timed.
describe.concurrent('the spend cap over generated batches (fast-check, dev server, simulator)', () => {
  const CAP_RUNS = runs(7);
  const CAP_BUDGET_MS = 60_000;
  it(
    `cap at the start, concurrency 1 to 32: spent + reserved and the simulator's net never pass it (${CAP_RUNS} cases)`,
    async () => {
      console.log(`[spend-cap] seed ${SEED} (IMAGEBATCH_SPEND_CAP_SEED=${SEED} runs these cases again)`);
      const arb = caseArb({
        concurrency: { min: 1, max: 32 },
        capPercent: { min: 20, max: 80 },
        afterRowsEnded: { min: 0, max: 0 },
      });
      await fc.assert(
        property('cap', arb, (c) => inProcessCase(c, 'cap', CAP_BUDGET_MS)),
        options(CAP_RUNS),
      );
    },
    CAP_RUNS * (CAP_BUDGET_MS + 15_000),
  );

  const RESUME_RUNS = runs(4);
  const RESUME_BUDGET_MS = 60_000;
  it(
    `cap set by resume on a running batch: the same from then on (${RESUME_RUNS} cases)`,
    async () => {
      // 2 to 8 in flight: rows are still waiting when the cap comes, and the case takes seconds, not half a minute.
      const arb = caseArb({
        concurrency: { min: 2, max: 8 },
        capPercent: { min: 0, max: 60 },
        afterRowsEnded: { min: 1, max: 5 },
      });
      await fc.assert(
        property('resume', arb, (c) => inProcessCase(c, 'resume', RESUME_BUDGET_MS)),
        options(RESUME_RUNS),
      );
    },
    RESUME_RUNS * (RESUME_BUDGET_MS + 15_000),
  );

  const KILL_RUNS = runs(1);
  const KILL_BUDGET_MS = 100_000;
  it(
    `a worker SIGKILLed mid-batch: the same through the kill (${KILL_RUNS} cases)`,
    async () => {
      await ensureDistIsFresh();
      // At least 4 in flight and a cap of 40% at least, so that the kill meets rows at the service.
      const arb = caseArb({
        concurrency: { min: 4, max: 32 },
        capPercent: { min: 40, max: 80 },
        afterRowsEnded: { min: 0, max: 0 },
      });
      await fc.assert(
        property('kill', arb, (c) => killCase(c, KILL_BUDGET_MS)),
        options(KILL_RUNS),
      );
    },
    KILL_RUNS * (KILL_BUDGET_MS + 60_000),
  );
});

// The file's own sanity: its case arithmetic.
describe('the case arithmetic', () => {
  it('prices a row as the batch reserves it, and sums without drift', () => {
    const c: CapCase = {
      simSeed: 1,
      centsPerImage: [3, 7],
      rows: [
        { model: 0, images: 3 },
        { model: 1, images: 1 },
        { model: 2, images: 2 },
      ],
      concurrency: 1,
      capPercent: 50,
      faultPercent: { failed502: 0, unavailable503: 0, failGeneration: 0 },
      drainBeforeCancel: true,
      afterRowsEnded: 0,
      killAfterMs: 0,
    };
    expect(rowPrices(c)).toEqual([0.09, 0.07, 0.06]);
    expect(sumUsd(rowPrices(c))).toBe(0.22);
  });
});
