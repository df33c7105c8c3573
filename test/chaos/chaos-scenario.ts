import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { startOrAttachBatch } from '../../src/cli/batches';
import { openLedgerStore, type LedgerStore } from '../../src/ledger';
import { reconcile } from '../../src/cli/commands/reconcile';
import { results } from '../../src/cli/commands/results';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { hash32, mulberry32, uniformInt, type Random } from '../../src/simulator/random';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { BatchProgress } from '../../src/model';
import { progressQuery, type batchWorkflow } from '../../src/workflows';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy';
import { WorkerProcess, ensureDistIsFresh, rowOutcomes, within } from '../integration/helpers';
import {
  CALM_LIMITS,
  ChaosEventKind,
  PROXY_FAULTS,
  STORMS,
  WORKER_SETTINGS,
  planEvents,
  simulatorConfig,
  writeChaosCsv,
  type PlannedEvent,
} from './chaos-plan';
import {
  computeFigures,
  reconcileFiguresOf,
  reconcileViolations,
  violationsOf,
  type ChaosFigures,
  type ReconcileFigures,
} from './invariants';
import { readResultsSpend, reconcileSpend, spendViolations, type SpendReconciliation } from './spend-reconciliation';
import { checkStore, storeViolations, type StoreCheck } from './store-check';

/** Options of {@link runChaos}. */
export interface ChaosOptions {
  /**
   * Rows of the batch.
   * @default 1000
   */
  rows?: number;
  /**
   * Worker SIGKILLs (each followed by a new worker).
   * @default 5
   */
  kills?: number;
  /**
   * Dev-server stops and restarts on its SQLite file.
   * @default 1
   */
  serverRestarts?: number;
  /**
   * Seed of everything random: the simulator, the proxy, the moments of the events, the storms.
   * @default 1
   */
  seed?: number;
  /**
   * Rows in flight at most.
   * @default 32
   */
  concurrency?: number;
  /**
   * Time allowed from the start of the batch to its end; past it the run fails with {@link ChaosBudgetError}.
   * @default 20 minutes
   */
  budgetMs?: number;
  /**
   * Keep the run's folder (SQLite file, batch file, images, results, worker logs) even when every invariant holds.
   * @default false (kept only when an invariant fails)
   */
  keepDir?: boolean;
  /**
   * Where progress lines go.
   * @default console.log
   */
  log?: (line: string) => void;
}

/** An event as it happened. */
export interface DoneEvent {
  kind: ChaosEventKind;
  /** Milliseconds since the batch started. */
  atMs: number;
  rowsEnded: number;
  inFlight: number;
  /** Kill: the new worker's start-up; restart: how long the server was down. */
  outageMs: number;
}

export interface ChaosReport {
  seed: number;
  rows: number;
  plan: PlannedEvent[];
  events: DoneEvent[];
  figures: ChaosFigures;
  /** The reconcile step after the batch. */
  reconcile: ReconcileFigures;
  /** The final results.jsonl (written by the reconcile step) against the simulator's charge book, per row and in total. */
  spend: SpendReconciliation;
  /** The ledger store against the simulator's charge book, after the reconcile step. */
  store: StoreCheck;
  /** Every invariant that does not hold, in words; empty when the run passed. */
  violations: string[];
  /** The run's folder, when it was kept. */
  dir: string | undefined;
}

/** The batch did not end within the time budget. */
export class ChaosBudgetError extends Error {
  readonly code = 'CHAOS_BUDGET_EXCEEDED';
  constructor(
    readonly budgetMs: number,
    readonly progress: string,
    readonly dir: string,
  ) {
    super(`the batch did not end within ${Math.round(budgetMs / 1000)} s (${progress}); its folder is kept: ${dir}`);
    this.name = 'ChaosBudgetError';
  }
}

const ended = (p: BatchProgress) => Object.values(p.counts).reduce((a, b) => a + b, 0);

/**
 * The chaos run: a batch on the SQLite-backed dev server against the simulator, through the TCP fault proxy,
 * with 429 storms, worker SIGKILLs and dev-server restarts at seeded moments. Returns the figures and the
 * invariants that failed; cleans up whatever happens.
 */
export async function runChaos(options: ChaosOptions = {}): Promise<ChaosReport> {
  const rows = options.rows ?? 1000;
  const seed = options.seed ?? 1;
  const budgetMs = options.budgetMs ?? 20 * 60_000;
  const log = options.log ?? ((line: string) => console.log(line));
  const random: Random = mulberry32(hash32('chaos', seed));
  const plan = planEvents(rows, options.kills ?? 5, options.serverRestarts ?? 1, random);
  log(`[chaos] seed ${seed}, ${rows} rows, plan: ${plan.map(describePlanned).join(', ')}`);

  const setUpAt = Date.now();
  await ensureDistIsFresh();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-chaos-'));
  const dbFile = path.join(dir, 'temporal.sqlite');
  let server: DevServer | undefined;
  let sim: Simulator | undefined;
  let proxy: FaultProxy | undefined;
  let connection: Connection | undefined;
  let worker: WorkerProcess | undefined;
  let ledger: LedgerStore | undefined;
  let keep = options.keepDir ?? false;
  let workerLogs = 0;
  const saveLog = async (w: WorkerProcess) => writeFile(path.join(dir, `worker-${++workerLogs}.log`), w.output());

  try {
    const file = path.join(dir, 'batch.csv');
    const outDir = path.join(dir, 'out');
    const rowIds = await writeChaosCsv(file, rows);
    server = await DevServer.start({ ...devServerBase(), dbFile, uiPort: false });
    const port = Number(server.address.split(':').pop());
    sim = await startSimulator(simulatorConfig(seed, rowIds));
    proxy = await startFaultProxy({ targetPort: sim.port, seed: hash32('proxy', seed), faults: PROXY_FAULTS });
    connection = await Connection.connect({ address: server.address });
    const client = new Client({ connection });
    const taskQueue = `chaos-${randomUUID()}`;
    const batchId = `chaos${seed}-${randomUUID().slice(0, 8)}`;
    // The store of what was paid: one file, shared by the workers and the commands of the run.
    const ledgerFile = path.join(dir, 'ledger.sqlite');
    ledger = await openLedgerStore({ kind: 'sqlite', file: ledgerFile });
    const env = {
      ...WORKER_SETTINGS,
      IMAGEBATCH_LEDGER: ledgerFile,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      IMAGEGEN_BASE_URL: proxy.rewrite(sim.baseUrl),
      IMAGEGEN_API_KEY: DEMO_API_KEY,
    };
    const startWorker = () => WorkerProcess.start({ outputRoot: dir, env, readyTimeoutMs: 120_000 });
    worker = await startWorker();
    log(`[chaos] set-up done: dev server, simulator, proxy and worker up in ${Date.now() - setUpAt} ms`);

    const t0 = Date.now();
    const deadline = t0 + budgetMs;
    const { handle } = await startOrAttachBatch({
      ledger,
      client,
      taskQueue,
      batchId,
      file,
      outDir,
      concurrency: options.concurrency ?? 32,
    });
    let done = false;
    const progressNow = () => within('a progress query', 10_000, handle.query(progressQuery));
    let last: BatchProgress | undefined;
    const events: DoneEvent[] = [];
    let storms = 0;
    let lastAt = 0;

    /** Keeps `last` fresh (a query a second); while nobody answers, `last` stays as it was. */
    async function watchProgress(): Promise<void> {
      while (!done) {
        const p = await progressNow().catch(() => undefined);
        if (p) [last, lastAt] = [p, Date.now()];
        await sleepUnless(1000, () => done);
      }
    }

    /** Waits until `n` rows have ended (or the batch is done); false once the budget is spent. */
    async function rowsEnded(n: number): Promise<boolean> {
      while (!done && Date.now() < deadline) {
        if (last && ended(last) >= n) return true;
        await sleep(250);
      }
      return false;
    }

    async function chaos(): Promise<void> {
      let previous = 0;
      for (const event of plan) {
        if (!(await rowsEnded(Math.max(event.afterRowsEnded, previous + 2)))) return;
        await sleep(event.thenWaitMs);
        if (done) return;
        const at = last ? { rowsEnded: ended(last), inFlight: last.inFlight } : { rowsEnded: 0, inFlight: 0 };
        previous = at.rowsEnded;
        const started = Date.now();
        switch (event.kind) {
          case ChaosEventKind.KillWorker: {
            const old = worker!;
            await old.kill();
            await saveLog(old);
            worker = await startWorker();
            break;
          }
          case ChaosEventKind.RestartServer:
            await server!.stop();
            server = await DevServer.start({ ...devServerBase(), dbFile, uiPort: false, port });
            break;
        }
        const done_: DoneEvent = { kind: event.kind, atMs: started - t0, ...at, outageMs: Date.now() - started };
        events.push(done_);
        log(`[chaos] ${describeDone(done_)}`);
      }
    }

    async function stormLoop(): Promise<void> {
      while (!done) {
        await sleepUnless(uniformInt(random, STORMS.gapMs.minMs, STORMS.gapMs.maxMs), () => done);
        if (done) return;
        sim!.setLimits({ requestsPerSecond: STORMS.requestsPerSecond, burst: STORMS.requestsPerSecond });
        storms++;
        await sleepUnless(uniformInt(random, STORMS.lengthMs.minMs, STORMS.lengthMs.maxMs), () => done);
        sim!.setLimits(CALM_LIMITS);
      }
    }

    const sampler = setInterval(() => {
      if (!last) return;
      const stale = Date.now() - lastAt > 5000 ? ` (no answer for ${Math.round((Date.now() - lastAt) / 1000)} s)` : '';
      const s = Math.round((Date.now() - t0) / 1000);
      log(`[chaos] ${s} s: ${ended(last)}/${rows} ended, ${last.inFlight} in flight${stale}`);
    }, 15_000);
    const watchDone = watchProgress();
    const chaosDone = chaos();
    const stormsDone = stormLoop();
    let progress: BatchProgress;
    try {
      progress = await awaitBatch(handle, deadline, log);
    } catch (err) {
      if (!(err instanceof BatchTimeout)) throw err;
      keep = true;
      const p = last ? `${ended(last)}/${rows} rows ended, ${last.inFlight} in flight` : 'no progress seen';
      throw new ChaosBudgetError(budgetMs, p, dir);
    } finally {
      done = true;
      clearInterval(sampler);
      await Promise.allSettled([watchDone, chaosDone, stormsDone]);
      sim.setLimits(CALM_LIMITS);
    }
    const batchMs = Date.now() - t0;
    log(`[chaos] the batch ended after ${(batchMs / 1000).toFixed(1)} s; checking`);

    // Creations of rows that ended `unknown` may still be running: let them end, so that the ledger is final.
    for (let i = 0; i < 40 && sim.stats().inFlight > 0; i++) await sleep(250);
    const step = stopwatch(log);
    const outcomes = await rowOutcomes(client, batchId, rowIds);
    step('read every row workflow');
    const runs = await runsPerRow(client, batchId);
    step('listed the row workflows');
    const written = await results({ client, batchId, ledger, outDir: path.join(dir, 'results') });
    step('wrote the result files');
    const figures = await computeFigures({
      rows,
      batchId,
      outDir,
      progress,
      outcomes,
      runsPerRow: runs,
      charges: sim.charges,
      written,
      events,
      storms,
      simulatorFaults: sim.faultCounts(),
      proxy: proxy.counts(),
      simulatorErrors: sim.unexpectedErrors().length,
      batchMs,
    });
    const violations = violationsOf(figures, {
      rows,
      kills: plan.filter((e) => e.kind === ChaosEventKind.KillWorker).length,
      serverRestarts: plan.filter((e) => e.kind === ChaosEventKind.RestartServer).length,
    });
    step('checked the ledger, the images and the result files');

    // The reconcile step, the storm over: every row whose money the batch left unresolved (unknown, max wait,
    // images unsaved, cancelled in flight) is resolved with its own key, or reported; nothing is paid twice.
    sim.setFaults({});
    proxy.setFaults({});
    const reconciled = await reconcile({ client, taskQueue, batchId, outDir, ledger });
    step('reconciled the unresolved rows');
    const reconcileFigures = reconcileFiguresOf(written.unresolvedRows, reconciled, batchId, sim.charges);
    violations.push(...reconcileViolations(reconcileFigures));
    // The spend reconciliation, on the final results: results.jsonl as the reconcile step wrote it again into the
    // batch's output folder, against every charge and refund of the simulator under the batch's keys.
    const spend = reconcileSpend(
      batchId,
      await readResultsSpend(reconciled.written.resultsJsonl),
      sim.charges.byCreation(),
    );
    violations.push(...spendViolations(spend));
    step('reconciled the spend of the final results against the ledger');
    // The ledger store against the simulator's charge book: every charge in both, to the cent.
    const store = await checkStore(ledger, batchId, sim.charges.byCreation());
    violations.push(...storeViolations(store));
    step('checked the ledger store against the simulator');
    if (violations.length > 0) keep = true;
    await saveLog(worker);
    return {
      seed,
      rows,
      plan,
      events,
      figures,
      reconcile: reconcileFigures,
      spend,
      store,
      violations,
      dir: keep ? dir : undefined,
    };
  } catch (err) {
    keep = true;
    if (worker) await saveLog(worker).catch(() => undefined);
    throw err;
  } finally {
    await worker?.kill();
    await connection?.close().catch(() => undefined);
    await proxy?.close();
    await sim?.close();
    await server?.stop();
    await ledger?.close();
    if (keep) log(`[chaos] the run's folder is kept: ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

class BatchTimeout extends Error {}

/**
 * The batch's final progress. `result()` follows continue-as-new; a call cut by the server restart is made
 * again, until the deadline.
 */
async function awaitBatch(
  handle: WorkflowHandle<typeof batchWorkflow>,
  deadline: number,
  log: (line: string) => void,
): Promise<BatchProgress> {
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new BatchTimeout();
    try {
      return await within('the batch', left, handle.result());
    } catch (err) {
      if (err instanceof WorkflowFailedError) throw err;
      if (Date.now() >= deadline) throw new BatchTimeout();
      log(`[chaos] waiting for the batch again after: ${err instanceof Error ? err.message : String(err)}`);
      await sleep(1000);
    }
  }
}

/** Runs of each row workflow, from visibility (the scenario owns the server: every promptWorkflow is a row). */
async function runsPerRow(client: Client, batchId: string): Promise<Map<string, number>> {
  const runs = new Map<string, number>();
  for await (const wf of client.workflow.list({ query: `WorkflowType = 'promptWorkflow'` })) {
    if (wf.workflowId.startsWith(`${batchId}/`)) runs.set(wf.workflowId, (runs.get(wf.workflowId) ?? 0) + 1);
  }
  return runs;
}

/** Logs how long each step took since the previous one. */
function stopwatch(log: (line: string) => void): (what: string) => void {
  let since = Date.now();
  return (what) => {
    log(`[chaos] ${what} in ${Date.now() - since} ms`);
    since = Date.now();
  };
}

async function sleepUnless(ms: number, stop: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!stop() && Date.now() < until) await sleep(Math.min(250, until - Date.now()));
}

function describePlanned(e: PlannedEvent): string {
  return `${e.kind} after ${e.afterRowsEnded} rows + ${e.thenWaitMs} ms`;
}

function describeDone(e: DoneEvent): string {
  const what = e.kind === ChaosEventKind.KillWorker ? 'killed the worker (SIGKILL)' : 'restarted the dev server';
  const outage = e.kind === ChaosEventKind.KillWorker ? 'new worker polling after' : 'down for';
  return `${what} at ${(e.atMs / 1000).toFixed(1)} s, ${e.rowsEnded} rows ended, ${e.inFlight} in flight; ${outage} ${e.outageMs} ms`;
}
