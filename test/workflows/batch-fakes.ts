import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import {
  batchWorkflowId,
  FailureType,
  type BatchCursor,
  type BatchProgress,
  type BatchRowInput,
  type CreateImageInput,
  type CreateImageResult,
  type KeyCheck,
  type ReadBatchPageInput,
  type ReadBatchPageResult,
} from '../../src/model';
import type { RecordRowInput } from '../../src/activities/ledger-activities';
import { batchWorkflow, progressQuery, type BatchWorkflowInput } from '../../src/workflows';
import { whileHeartbeating } from '../../src/activities/heartbeat';
import { createRowActivities } from '../../src/activities/rows';
import { workflowBundle } from '../helpers/temporal';
import { lazyTempLedger } from '../helpers/ledger';

export function rows(n: number): BatchRowInput[] {
  return Array.from({ length: n }, (_, i) => ({
    rowId: `row-${i + 1}`,
    line: i + 2,
    request: { prompt: `prompt number ${i + 1}`, model: 'flux-dev' },
  }));
}

/**
 * Fake activities for a whole batch: pages from an in-memory list, and per-row behaviour decided by a function
 * of the row id and its submission count (`hang`: the submission never ends until it is cancelled; `fail-later`:
 * the creation fails, refunded, after 3 s; `quota`: succeeds, its worker saying the account's quota binds). Records the
 * largest number of rows open at once. Rows are looked up for real (the batch asks Temporal about its rows).
 */
/**
 * What a row's createImage does at a submission: `refused` stops the batch as images refused here would (the next
 * call succeeds); `unsaved` ends the row images_unsaved (a host's 404); `rejected`, `unknown`, `declined` (the safety
 * filter) end it so; `dear` succeeds charged $0.10.
 */
export type Behaviour =
  | 'ok'
  | 'stop'
  | 'slow'
  | 'hang'
  | 'fail-later'
  | 'quota'
  | 'refused'
  | 'unsaved'
  | 'rejected'
  | 'unknown'
  | 'declined'
  | 'dear';

/** What a service that honours the key shows the check of a canary that proves it. */
export const HONOURED: KeyCheck = {
  result: 'honoured',
  carrier: 'header Idempotency-Key',
  message: 'the key at header Idempotency-Key was honoured: the same creation came back',
};

export function batchActivities(
  client: Client,
  all: BatchRowInput[],
  behaviour: (rowId: string, submission: number) => Behaviour,
  options: {
    proven?: boolean;
    /** What the check of a key sent with `proveKey` shows. @default honoured */
    keyCheck?: (rowId: string, submission: number) => KeyCheck;
  } = {},
) {
  const submissions = new Map<string, number>();
  const open = new Set<string>();
  const stats = { maxOpen: 0, submits: 0, pagesRead: 0, proofs: 0, events: [] as string[], provingKey: [] as string[] };
  const rowLookups = createRowActivities({
    temporalClient: client,
    outputRoot: tmpdir(),
    now: Date.now,
    ledger: lazyTempLedger(),
  });
  const recorded: RecordRowInput[] = [];
  return {
    stats,
    activities: {
      async readBatchPage(input: ReadBatchPageInput): Promise<ReadBatchPageResult> {
        stats.pagesRead += 1;
        const start = input.cursor?.byteOffset ?? 0;
        const page = all.slice(start, start + input.maxRows);
        const next: BatchCursor = {
          byteOffset: start + page.length,
          line: 0,
          rowsBefore: start + page.length,
          header: ['prompt'],
        };
        return { rows: page, invalidRows: 0, nextCursor: next, done: start + page.length >= all.length };
      },
      // Proven unless told otherwise: the batch tests are of its other mechanics; the canary's own say `proven: false`.
      async checkServiceProof() {
        return { proven: options.proven !== false };
      },
      async recordServiceProof(): Promise<void> {
        stats.proofs += 1;
      },
      async fetchModels() {
        return [{ id: 'flux-dev', priceUsd: 0.04 }];
      },
      lookupRow: (input: { workflowId: string }) => rowLookups.lookupRow(input),
      async recordRow(input: RecordRowInput): Promise<void> {
        recorded.push(input);
      },
      async createImage(input: CreateImageInput): Promise<CreateImageResult> {
        const rowId = input.rowId;
        const n = (submissions.get(rowId) ?? 0) + 1;
        submissions.set(rowId, n);
        stats.submits += 1;
        stats.events.push(`start:${rowId}`);
        try {
          const result = await scripted(rowId, n);
          if (!input.proveKey) return result;
          stats.provingKey.push(rowId);
          return { ...result, keyCheck: options.keyCheck?.(rowId, n) ?? HONOURED };
        } finally {
          stats.events.push(`end:${rowId}`);
        }
      },
    },
  };

  async function scripted(rowId: string, n: number): Promise<CreateImageResult> {
    const { ApplicationFailure } = await import('@temporalio/common');
    const fail = (type: FailureType, message: string, details: unknown, creationId?: string) =>
      ApplicationFailure.create({
        type,
        nonRetryable: true,
        message,
        details: [details, creationId ? { creationId } : {}],
      });
    switch (behaviour(rowId, n)) {
      case 'refused':
        throw fail(
          FailureType.BatchStop,
          'images refused',
          { reason: 'images_refused', httpStatus: 0, message: 'images refused: set IMAGEGEN_IMAGE_FIELDS' },
          `c-${rowId}-1`,
        );
      case 'unsaved':
        throw fail(
          FailureType.DownloadFailed,
          'image 0: HTTP 404',
          { url: 'u', index: 0, reason: 'HTTP 404', httpStatus: 404 },
          `c-${rowId}-${n}`,
        );
      case 'rejected':
        throw fail(FailureType.Rejected, 'rejected', {
          httpStatus: 400,
          code: 'ERR_VALIDATION',
          message: 'model not found',
          fieldErrors: [],
        });
      case 'unknown':
        throw fail(FailureType.Unknown, 'no answer', { tries: 5, lastError: 'connection reset' });
      case 'declined':
        return {
          outcome: 'failed',
          creationId: `c-${rowId}-${n}`,
          costUsd: 0.04,
          error: 'Prompt rejected by the safety filter.',
          retryable: false,
        };
      case 'dear':
        return {
          outcome: 'succeeded',
          creationId: `c-${rowId}-${n}`,
          costUsd: 0.1,
          images: [{ url: 'u', path: `${rowId}.png`, sha256: 'x', bytes: 1 }],
        };
      default:
        break;
    }
    if (behaviour(rowId, n) === 'hang') {
      // Heartbeats like the real activity, so that it is cancelled (not timed out) when its row goes away.
      const ctx = Context.current();
      await whileHeartbeating(ctx, ctx.cancelled, 1_000);
    }
    if (behaviour(rowId, n) === 'stop') {
      throw ApplicationFailure.create({
        type: FailureType.BatchStop,
        nonRetryable: true,
        message: 'insufficient balance',
        details: [{ reason: 'insufficient_balance', httpStatus: 402, message: 'top up', requiredUsd: 0.04 }, {}],
      });
    }
    if (behaviour(rowId, n) === 'fail-later') {
      // A creation that fails (refunded, retryable) a few seconds after the key went out.
      const ctx = Context.current();
      await whileHeartbeating(ctx, new Promise((r) => setTimeout(r, 3_000)), 1_000);
      return {
        outcome: 'failed',
        creationId: `c-${rowId}-${n}`,
        costUsd: 0.04,
        error: 'Generation failed.',
        retryable: true,
      };
    }
    open.add(rowId);
    stats.maxOpen = Math.max(stats.maxOpen, open.size);
    if (behaviour(rowId, n) === 'slow') await new Promise((r) => setTimeout(r, 50));
    open.delete(rowId);
    return {
      outcome: 'succeeded',
      creationId: `c-${rowId}-${n}`,
      costUsd: 0.04,
      images: [{ url: 'u', path: `${rowId}.png`, sha256: 'x', bytes: 1 }],
      ...(behaviour(rowId, n) === 'quota' ? { limit: 'concurrency' as const } : {}),
    };
  }
}

export async function startBatch(
  env: () => TestWorkflowEnvironment,
  all: BatchRowInput[],
  behaviour: Parameters<typeof batchActivities>[2],
  extra: Partial<BatchWorkflowInput>,
  options: Parameters<typeof batchActivities>[3] = {},
) {
  const taskQueue = `batch-${randomUUID()}`;
  const fake = batchActivities(env().client, all, behaviour, options);
  const worker = await Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: fake.activities,
  });
  const batchId = `b${randomUUID().slice(0, 8)}`;
  const input: BatchWorkflowInput = { batchId, file: 'mem', outDir: '/tmp/out', ...extra };
  /** Starts (again) the batch's workflow; `progress(done)` waits until its progress satisfies `done`. */
  const launch = async () => {
    const handle = await env().client.workflow.start(batchWorkflow, {
      taskQueue,
      workflowId: batchWorkflowId(batchId),
      args: [input],
    });
    const progress = (done: (p: BatchProgress) => boolean) => until(env, () => handle.query(progressQuery), done);
    return Object.assign(handle, { progress });
  };
  return { worker, fake, batchId, taskQueue, input, launch };
}

/**
 * Asks `probe` every second until `done` holds (at most 90 tries, within the tests' 120 s), each answer awaited 5 s at
 * most, so that a batch that hangs shows its last progress, or that nobody answered, instead of a bare timeout.
 */
export async function until(
  env: () => TestWorkflowEnvironment,
  probe: () => Promise<BatchProgress>,
  done: (p: BatchProgress) => boolean,
): Promise<BatchProgress> {
  let last: BatchProgress | 'no answer' | undefined;
  for (let i = 0; i < 90; i++) {
    const answer = probe();
    answer.catch(() => undefined); // an answer that comes after the 5 s is dropped, a failure too
    last = await Promise.race([answer, new Promise<'no answer'>((r) => setTimeout(() => r('no answer'), 5_000))]);
    if (last !== 'no answer' && done(last)) return last;
    await env().sleep(1_000);
  }
  throw new Error(`the batch never got there: ${JSON.stringify(last)}`);
}
