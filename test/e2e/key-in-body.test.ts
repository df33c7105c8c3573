import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { openLedgerStore, type LedgerStore } from '../../src/ledger';
import { idempotencyKeyFor, parseIdempotencyKey, type BatchProgress } from '../../src/model';
import {
  DEMO_API_KEY,
  FaultKind,
  PREDICTION_SERVICE_PROFILE,
  startSimulator,
  type Simulator,
} from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { WorkerProcess, ensureDistIsFresh, within } from '../integration/helpers';

/**
 * Issue #42's acceptance for the key in the body: a batch against a prediction-style service that reads the
 * idempotency key only from a body field (the simulator's prediction-service profile: a key in a header is ignored),
 * with `IMAGEGEN_IDEMPOTENCY_FIELD` set. Three submissions are charged and still unanswered when their worker is
 * SIGKILLed (their attempts are retried by a new worker after the heartbeat timeout), and three answers are lost
 * after the charge (the connection reset after the commit). Every send again carries the same key where the service
 * reads it: no creation is charged twice, and each prompt is paid once net. A tester saw 83 of 83 submits carry no
 * key the service honoured, and a prompt paid twice.
 */
const ROWS = 12;
const rowIds = Array.from({ length: ROWS }, (_, i) => `r${String(i).padStart(2, '0')}`);
const promptOf = (rowId: string) => `a lighthouse in the rain, study ${rowId}`;
/** Answered 8 s late: still unanswered when the worker is killed, answered before the attempt is retried. */
const SLOW_ROWS = ['r01', 'r02', 'r03'];
const RESET_ROWS = ['r04', 'r05', 'r06'];
const layout = PREDICTION_SERVICE_PROFILE.requestLayout!.fields!;
const KEY_FIELD = PREDICTION_SERVICE_PROFILE.idempotency!.field!;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let connection: Connection | undefined;
let ledger: LedgerStore | undefined;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-key-field-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  sim = await startSimulator({
    ...PREDICTION_SERVICE_PROFILE,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 500, burst: 500, accountConcurrency: null },
  });
  for (const r of SLOW_ROWS) sim.scriptFor(promptOf(r), [{ kind: FaultKind.Slow, delayMs: 8_000 }]);
  for (const r of RESET_ROWS) sim.scriptFor(promptOf(r), [{ kind: FaultKind.ResetAfterCommit }]);
  connection = await Connection.connect({ address: server.address });
}, 120_000);

afterAll(async () => {
  for (const w of workers) await w.kill();
  await ledger?.close();
  await connection?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the key in a body field, through a worker kill and answers lost after the charge', () => {
  it(`${ROWS} rows: 0 creations charged twice, one net charge per prompt`, async () => {
    const file = path.join(dir, 'prompts.csv');
    await writeFile(file, `id,prompt\n${rowIds.map((id) => `${id},"${promptOf(id)}"`).join('\n')}\n`);
    const ledgerFile = path.join(dir, 'ledger.sqlite');
    ledger = await openLedgerStore({ kind: 'sqlite', file: ledgerFile });
    const taskQueue = `key-field-${randomUUID()}`;
    const batchId = `kf${randomUUID().slice(0, 8)}`;
    const env = {
      IMAGEBATCH_LEDGER: ledgerFile,
      TEMPORAL_ADDRESS: server!.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      IMAGEGEN_BASE_URL: sim!.baseUrl,
      IMAGEGEN_API_KEY: DEMO_API_KEY,
      IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
      IMAGEGEN_BACKOFF_BASE_MS: '250',
      IMAGEGEN_REQUEST_FIELDS: Object.entries(layout)
        .map(([field, target]) => `${field}=${target}`)
        .join(','),
      IMAGEGEN_IDEMPOTENCY_FIELD: KEY_FIELD,
    };
    const startWorker = async () => {
      const worker = await WorkerProcess.start({ outputRoot: dir, env, readyTimeoutMs: 120_000 });
      workers.push(worker);
      return worker;
    };
    const first = await startWorker();
    const client = new Client({ connection: connection! });
    const { handle } = await startOrAttachBatch({
      ledger,
      client,
      taskQueue,
      batchId,
      file,
      outDir: path.join(dir, 'out'),
      defaultModel: 'flux-dev',
      concurrency: 8,
    });

    // The slow rows charged, their answers not yet sent: the worker that waits for them dies.
    const slowKeys = SLOW_ROWS.map((r) => idempotencyKeyFor(batchId, r, 1));
    for (let i = 0; !slowKeys.every((k) => netChargesOf(k) > 0); i++) {
      if (i > 300) throw new Error(`the slow rows were never charged:\n${first.output()}`);
      await sleep(100);
    }
    await first.kill();
    await startWorker();

    const progress: BatchProgress = await within('the batch', 120_000, handle.result()).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${workers.map((w, i) => `worker ${i + 1}:\n${w.output()}`).join('\n')}`);
    });

    // The faults happened: the kill met the slow rows unanswered, and three answers were lost after the charge.
    const faults = sim!.faultCounts();
    expect([faults[FaultKind.Slow], faults[FaultKind.ResetAfterCommit]]).toEqual([3, 3]);
    const ours = sim!.charges
      .byIdempotencyKey()
      .filter((s) => parseIdempotencyKey(s.idempotencyKey)?.batchId === batchId);
    const rowOf = (key: string) => parseIdempotencyKey(key)!.rowId;
    const chargedTwice = ours.filter((s) => s.netCharged > 1).map((s) => `${rowOf(s.idempotencyKey)}: ${s.netCharged}`);
    expect(chargedTwice.sort()).toEqual([]);
    const perRow = new Map<string, number>();
    for (const s of ours)
      perRow.set(rowOf(s.idempotencyKey), (perRow.get(rowOf(s.idempotencyKey)) ?? 0) + s.netCharged);
    expect(Object.fromEntries(perRow)).toEqual(Object.fromEntries(rowIds.map((r) => [r, 1])));
    expect(progress.counts).toMatchObject({ succeeded: ROWS });
  }, 180_000);
});

function netChargesOf(key: string): number {
  return sim!.charges.byIdempotencyKey().find((s) => s.idempotencyKey === key)?.netCharged ?? 0;
}
