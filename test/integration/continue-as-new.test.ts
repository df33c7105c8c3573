import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { defaultServiceConfig } from '../../src/config/service-config';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { createWorker } from '../../src/worker';
import { batchWorkflowId } from '../../src/model';
import { batchWorkflow, promptWorkflow } from '../../src/workflows';
import { ROW_HAPPY_PATH_EVENTS } from '../helpers/history-events';
import { workflowBundle } from '../helpers/temporal';
import { rowOutcomes, within, writeBatchCsv } from './helpers';
import { lazyTempLedger } from '../helpers/ledger';

/**
 * Continue-as-new on the real server code: the dev server suggests continue-as-new after a low history count,
 * and a batch of 120 rows must hop through several runs, every run's history staying near that threshold,
 * every row's history small.
 */
const SUGGEST_AT = 200;
const ROWS = 120;
const PAGE_SIZE = 10;
const WINDOW = 5;
/**
 * Events one row adds to its batch's history at most: the child's initiation, its start, its close and its
 * rowDone signal, and the three workflow tasks these wake (three events each) when none is shared.
 */
const BATCH_EVENTS_PER_ROW = 13;
/**
 * A run continues as new at the first page boundary after the server's suggestion: by then at most one page of
 * rows has started and the rows of that page and of the window have ended, plus one page read (an activity and
 * its workflow task, six events).
 */
const RUN_MAX_EVENTS = SUGGEST_AT + (PAGE_SIZE + WINDOW) * BATCH_EVENTS_PER_ROW + 6;
/** The budget of a row's history here: a row of a batch's happy path (see ROW_HAPPY_PATH_EVENTS), plus one. */
const ROW_HAPPY_PATH_MAX_EVENTS = ROW_HAPPY_PATH_EVENTS.inBatch + 1;

let dir: string;
let server: DevServer | undefined;
let sim: Simulator | undefined;
let connection: Connection | undefined;
let native: NativeConnection | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-can-'));
  server = await DevServer.start({
    ...devServerBase(),
    uiPort: false,
    dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': SUGGEST_AT },
  });
  sim = await startSimulator({
    // Short enough that most creations have ended by the first poll: the test is about histories, not waits.
    generation: { queuedMs: { minMs: 5, maxMs: 20 }, runningMs: { minMs: 10, maxMs: 40 } },
    limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000 },
  });
  connection = await Connection.connect({ address: server.address });
  native = await NativeConnection.connect({ address: server.address });
});

afterAll(async () => {
  await native?.close();
  await connection?.close();
  await sim?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type HistoryEvent = NonNullable<History['events']>[number];

function tally(values: readonly number[]): string {
  const counts = new Map<number, number>();
  for (const n of values) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([n, c]) => `${n} events x${c}`)
    .join(', ');
}

async function newWorker(client: Client, taskQueue: string) {
  return createWorker({
    connection: native!,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activityDeps: {
      config: defaultServiceConfig({ baseUrl: sim!.baseUrl, minPollIntervalMs: 100 }),
      apiKey: () => DEMO_API_KEY,
      outputRoot: dir,
      temporalClient: client,
      ledger: lazyTempLedger(),
    },
  });
}

// The two tests run at once: each has its own task queue, worker and workflows, and a history's length does not
// depend on what else the server runs.
describe.concurrent('history sizes and continue-as-new on the dev server', () => {
  it('a row on its own: the happy path is a short history', async ({ expect }) => {
    const client = new Client({ connection: connection! });
    const taskQueue = `row-${randomUUID()}`;
    const batchId = `solo${randomUUID().slice(0, 8)}`;
    const worker = await newWorker(client, taskQueue);
    const lengths: number[] = [];
    await worker.runUntil(async () => {
      for (const rowId of ['a', 'b', 'c']) {
        const handle = await client.workflow.start(promptWorkflow, {
          taskQueue,
          workflowId: `${batchId}/${rowId}`,
          args: [
            { batchId, rowId, request: { prompt: 'a lighthouse on a cliff at dusk', model: 'sdxl' }, outDir: 'solo' },
          ],
        });
        expect((await within('a row', 30_000, handle.result())).state).toBe('succeeded');
        lengths.push((await handle.fetchHistory()).events?.length ?? 0);
      }
    });
    expect(Math.max(...lengths)).toBeLessThanOrEqual(ROW_HAPPY_PATH_MAX_EVENTS);
    console.log(`[history] a row on its own, happy path: ${tally(lengths)}`);
  });

  it('a 120-row batch hops through several runs, each history bounded, every row on its happy path', async ({
    expect,
  }) => {
    const t0 = Date.now();
    const client = new Client({ connection: connection! });
    const taskQueue = `can-${randomUUID()}`;
    const batchId = `can${randomUUID().slice(0, 8)}`;
    const file = path.join(dir, 'batch.csv');
    const rowIds = await writeBatchCsv(file, ROWS);
    const worker = await newWorker(client, taskQueue);

    const workflowId = batchWorkflowId(batchId);
    const { progress, firstRunId, rows, elapsed } = await worker.runUntil(async () => {
      const handle = await client.workflow.start(batchWorkflow, {
        taskQueue,
        workflowId,
        args: [{ batchId, file, outDir: 'out', concurrency: WINDOW, pageSize: PAGE_SIZE }],
      });
      const result = await within('the batch', 120_000, handle.result());
      const took = Date.now() - t0;
      // The worker keeps running until every row has closed too: a row reports to its batch just before its own
      // workflow completes, so the last rows may still be closing when the batch's result arrives.
      return {
        progress: result,
        firstRunId: handle.firstExecutionRunId,
        rows: await rowOutcomes(client, batchId, rowIds),
        elapsed: took,
      };
    });

    expect(progress.counts.succeeded).toBe(ROWS);
    expect(progress.started).toBe(ROWS);
    expect(progress.runs).toBeGreaterThan(2);

    // Every run of the batch, following the chain of continue-as-new from the first.
    const runLengths: number[] = [];
    for (let runId: string | undefined = firstRunId; runId;) {
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const events: HistoryEvent[] = history.events ?? [];
      runLengths.push(events.length);
      runId = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
      expect(runLengths.length).toBeLessThanOrEqual(ROWS);
    }
    expect(runLengths).toHaveLength(progress.runs);
    for (const length of runLengths) expect(length).toBeLessThanOrEqual(RUN_MAX_EVENTS);

    // Every row's own history: its happy path, plus its report to the batch.
    expect(rows.filter((r) => r.result?.state !== 'succeeded')).toEqual([]);
    const rowLengths = await Promise.all(
      rowIds.map(
        async (rowId) => (await client.workflow.getHandle(`${batchId}/${rowId}`).fetchHistory()).events!.length,
      ),
    );
    expect(Math.max(...rowLengths)).toBeLessThanOrEqual(ROW_HAPPY_PATH_MAX_EVENTS);

    const total = runLengths.reduce((a, b) => a + b, 0);
    console.log(
      `[history] ${ROWS} rows (page ${PAGE_SIZE}, window ${WINDOW}, continue-as-new suggested at ${SUGGEST_AT}) in ` +
        `${(elapsed / 1000).toFixed(1)} s: ${progress.runs} runs of ${runLengths.join(', ')} events (bound ` +
        `${RUN_MAX_EVENTS}; ${(total / ROWS).toFixed(1)} batch events per row); rows of the batch: ${tally(rowLengths)}`,
    );
  }, 180_000);
});
