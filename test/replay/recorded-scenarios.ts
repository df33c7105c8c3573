/**
 * Scenarios and helpers of record-histories.ts that did not fit in it: see that file for how fixtures are recorded.
 */
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { defaultServiceConfig } from '../../src/config/service-config';
import { batchWorkflowId, KeyOutcome, type PromptWorkflowInput } from '../../src/model';
import { DEMO_API_KEY } from '../../src/simulator';
import { createWorker } from '../../src/worker';
import { batchWorkflow, progressQuery, promptWorkflow, type BatchWorkflowInput } from '../../src/workflows';
import { NOT_SENT_KEYS } from '../../src/workflows/prompt-workflow';
import { lazyTempLedger } from '../helpers/ledger';

type Save = (name: string, handle: WorkflowHandle, runId?: string) => Promise<void>;

/** What a scenario on a worker of its own needs from the recorder. */
interface OwnWorker {
  client: Client;
  native: NativeConnection;
  outputRoot: string;
}

/** A worker of a scenario's own, on `taskQueue`, with the service settings `config` and the demo key. */
function ownWorker(ctx: OwnWorker, taskQueue: string, config: ReturnType<typeof defaultServiceConfig>) {
  return createWorker({
    connection: ctx.native,
    taskQueue,
    activityDeps: {
      config,
      apiKey: () => DEMO_API_KEY,
      outputRoot: ctx.outputRoot,
      temporalClient: ctx.client,
      ledger: lazyTempLedger(),
    },
  });
}

/**
 * A row whose service is not there (nothing listens at its base URL): every send fails before a byte leaves, and the
 * key ends `not_sent`, charged nothing (patch `not-sent-keys`). On a worker of its own, with that base URL.
 */
export async function recordNotSent(ctx: OwnWorker & { save: Save }): Promise<void> {
  const taskQueue = 'replay-recording-not-sent';
  const worker = await ownWorker(
    ctx,
    taskQueue,
    defaultServiceConfig({
      baseUrl: `http://127.0.0.1:${await closedPort()}/api/public/v1`,
      maxAmbiguousTries: 4,
      backoffBaseMs: 400,
      backoffMaxMs: 1_000,
    }),
  );
  await worker.runUntil(async () => {
    const input: PromptWorkflowInput = {
      batchId: 'replay',
      rowId: 'not-sent',
      request: { prompt: 'a lighthouse nobody can reach', model: 'flux-dev' },
      outDir: 'replay',
    };
    const handle = await ctx.client.workflow.start(promptWorkflow, {
      taskQueue,
      workflowId: 'replay/not-sent',
      args: [input],
    });
    const record = await handle.result();
    if (record.state !== 'failed' || record.keys[0]?.outcome !== KeyOutcome.NotSent || record.chargedUsd !== 0) {
      throw new Error(`not-sent row: ${JSON.stringify(record)}`);
    }
    if (!hasPatch(await handle.fetchHistory(), NOT_SENT_KEYS)) throw new Error('not-sent row: no patch marker');
    await ctx.save('prompt-not-sent', handle);

    // Cancelled while its key's sends keep failing before a byte leaves: the store's record says not_sent.
    const cancelled = await ctx.client.workflow.start(promptWorkflow, {
      taskQueue,
      workflowId: 'replay/not-sent-cancelled',
      args: [{ ...input, rowId: 'not-sent-cancelled' }],
    });
    await sleep(1_000);
    await cancelled.cancel();
    const after = await cancelled.result();
    if (after.state !== 'cancelled' || after.keys[0]?.outcome !== KeyOutcome.NotSent || after.chargedUsd !== 0) {
      throw new Error(`not-sent cancelled row: ${JSON.stringify(after)}`);
    }
    await ctx.save('prompt-not-sent-cancelled', cancelled);
  });
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/**
 * A batch with no `concurrency` (patch `adaptive-window`): its window starts at 8 and grows by one a row (slow start)
 * past the account's 8 creations in flight; rows meet 429 ERR_QUOTA_EXCEEDED and report the quota, which cuts the
 * window. Its progress, queried while it runs, shows the window grown past 8 and then cut by the quota.
 */
export async function recordAdaptiveWindow(ctx: OwnWorker & { baseUrl: string; save: Save }): Promise<void> {
  // A worker of its own: a worker reports a limit for 30 s after it met one, and the quota scenario's just did.
  const taskQueue = 'replay-recording-window';
  const worker = await ownWorker(
    ctx,
    taskQueue,
    defaultServiceConfig({ baseUrl: ctx.baseUrl, minPollIntervalMs: 100 }),
  );
  await worker.runUntil(() => windowScenario(ctx, taskQueue));
}

async function windowScenario(
  ctx: { client: Client; save: Save; outputRoot: string },
  taskQueue: string,
): Promise<void> {
  const file = path.join(ctx.outputRoot, 'window.csv');
  const rows = Array.from({ length: 40 }, (_, i) => `w${i + 1},a paper lantern number ${i + 1}`);
  await writeFile(file, `id,prompt\n${rows.join('\n')}\n`);
  const handle = await ctx.client.workflow.start(batchWorkflow, {
    taskQueue,
    workflowId: batchWorkflowId('replay-window'),
    args: [{ batchId: 'replay-window', file, outDir: 'window', defaultModel: 'flux-dev' }] as [BatchWorkflowInput],
  });
  let grown = 0;
  let cutBy: string | undefined;
  await waitFor(async () => {
    const p = await handle.query(progressQuery);
    grown = Math.max(grown, p.window?.size ?? 0);
    cutBy ??= p.window?.boundBy;
    return p.done || (cutBy !== undefined && cutBy !== 'ceiling');
  });
  const result = await handle.result();
  if (result.counts.succeeded !== 40 || grown <= 8 || cutBy !== 'concurrency') {
    throw new Error(`window batch: grown to ${grown}, cut by ${cutBy}: ${JSON.stringify(result)}`);
  }
  await ctx.save('batch-window-grows-then-quota-cuts', handle);
}

/** Whether `history` holds the marker of patch `id` (its data, decoded, names it). */
export function hasPatch(history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>, id: string): boolean {
  return (history.events ?? []).some((e) =>
    Object.values(e.markerRecordedEventAttributes?.details ?? {}).some((p) =>
      (p.payloads ?? []).some((d) =>
        Buffer.from(d.data ?? new Uint8Array())
          .toString()
          .includes(id),
      ),
    ),
  );
}

export function expectState(result: { state: string; keys: unknown[] }, state: string, keys = 1): void {
  if (result.state !== state || result.keys.length !== keys) {
    throw new Error(`expected ${state} after ${keys} key(s), got ${JSON.stringify(result)}`);
  }
}

export async function waitFor(probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await sleep(100);
  }
}
