import path from 'node:path';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { validateBatchFile, type BatchReport } from '../batch';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { fileFingerprint, type FileFingerprint, type LedgerStore } from '../ledger';
import {
  batchAsks,
  BatchFileChangedError,
  BatchSourceOpenError,
  contentDifference,
  describeFingerprint,
  sameFingerprint,
} from './batch-identity';
import { importOutputFolder } from './ledger-store';

export { BatchFileChangedError, BatchSourceOpenError, batchAsks, defaultBatchId } from './batch-identity';
import { batchWorkflow, progressQuery, type BatchWorkflowInput } from '../workflows';
import { batchWorkflowId, ID_PATTERN, type BatchProgress } from '../model';
import { ID_RULE } from './options';
import { checkDeclaredPrices } from './price-floor';
import { checkPricesForCap } from './prices';
import { SKIP_INVALID_MAX_PROBLEMS, skipRefusal, withCarried } from './file-rows';

/** The batch file has problems: nothing was started (the report lists every one, with its line). */
export class BatchValidationError extends ImagebatchError {
  readonly code = ErrorCode.BatchInvalid;
  /** @param why with `--skip-invalid`: why the file cannot be run without its invalid rows */
  constructor(
    readonly report: BatchReport,
    why?: string,
  ) {
    super(
      `${report.problemCount} problem(s) in the batch file; nothing was started` +
        (why === undefined ? '' : ` (--skip-invalid leaves out invalid rows only, and here ${why})`),
    );
  }
}

/** A batch as the command line gives it: the workflow's input before the file was read. */
export interface BatchOptions extends Omit<BatchWorkflowInput, 'state' | 'file' | 'outDir'> {
  /** The batch file, as the workers see it (made absolute). */
  file: string;
  /** Output folder, as the workers see it (made absolute). */
  outDir: string;
  /**
   * Run the valid rows of a file whose problems are all rows' own (`--skip-invalid`): the batch's page reader leaves
   * the invalid ones out. A problem of the whole file, or a row id used twice, still refuses. Not part of the
   * workflow's input.
   * @default false
   */
  skipInvalid?: boolean;
}

/** A batch whose id and whole file were checked, before anything connects: what {@link startOrAttachBatch} starts. */
export interface PreparedBatch {
  /** The workflow's input, with the file and the output folder made absolute. */
  input: BatchWorkflowInput;
  /** The file's report (a file with problems is a {@link BatchValidationError} instead). */
  report: BatchReport;
  /** The file's size and SHA-256 when it was checked. */
  fingerprint: FileFingerprint;
}

/**
 * Checks a batch before anything connects: its id, then the whole file (nothing starts if any row is wrong: a
 * {@link BatchValidationError}, unless `skipInvalid` and every problem is a row's own; a file that cannot be read is a
 * BatchFileError naming it), and takes the file's fingerprint. A command calls it before it connects to Temporal, so
 * a wrong file is said at once. Columns that are neither ours nor sent (`--column`) are carried: the input's
 * `userColumns.carry` names them all, so the workers and the batch's identity see them as if given to `--carry`.
 */
export async function prepareBatch(options: BatchOptions): Promise<PreparedBatch> {
  const { skipInvalid, ...batch } = options;
  if (!ID_PATTERN.test(options.batchId)) {
    throw new Error(`batch id ${JSON.stringify(options.batchId)} ${ID_RULE}`);
  }
  const input: BatchWorkflowInput = {
    ...batch,
    file: path.resolve(batch.file),
    outDir: path.resolve(batch.outDir),
  };
  const report = await validateBatchFile(input.file, {
    ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    ...(input.userColumns ? { userColumns: input.userColumns } : {}),
    carryOthers: true,
    ...(skipInvalid ? { maxProblems: SKIP_INVALID_MAX_PROBLEMS } : {}),
  });
  if (!report.ok) {
    const refusal = skipInvalid ? skipRefusal(report) : '';
    if (refusal !== undefined) throw new BatchValidationError(report, refusal || undefined);
  }
  const { userColumns: _given, ...rest } = input;
  const userColumns = withCarried(input.userColumns, report);
  return {
    input: { ...rest, ...(userColumns ? { userColumns } : {}) },
    report,
    fingerprint: await fileFingerprint(input.file),
  };
}

/**
 * Options of {@link startOrAttachBatch}: the client and task queue, the ledger store, and the batch from
 * {@link prepareBatch} (`prepared`), or its options (prepared first, after connecting: for callers whose file is
 * their own).
 */
export type StartBatchOptions = {
  client: Client;
  taskQueue: string;
  ledger: LedgerStore;
  /** The worker's settings (for the prints of an earlier version's ledger.jsonl). @default the process's environment */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * The caller has checked the batch's declared prices against the store (checkDeclaredPrices): not scanned again.
   * @default false
   */
  pricesChecked?: boolean;
} & ({ prepared: PreparedBatch } | BatchOptions);

export interface StartedBatch {
  handle: WorkflowHandle<typeof batchWorkflow>;
  /** True when a batch with this id was already running and we attached to it. */
  attached: boolean;
  report: BatchReport;
}

/**
 * Starts a prepared batch (see {@link prepareBatch}), or attaches to the running batch of the same id. A batch id
 * whose batch has ended starts again: every row that exists is counted from its own result, nothing is submitted
 * twice.
 *
 * A batch is what it asks: its file's fingerprint and its options (model, columns, new images) are compared with
 * those in the memo of the batch workflow Temporal still has, and with every start of the id in the ledger store
 * (which outlives Temporal's retention); a difference is a {@link BatchFileChangedError} and nothing starts. The
 * batch is then recorded in the store, and its rows are told the store's id: a worker on another store sends
 * nothing for them.
 */
export async function startOrAttachBatch(options: StartBatchOptions): Promise<StartedBatch> {
  const { client, taskQueue, ledger, env, pricesChecked, ...batch } = options;
  const { input, report, fingerprint } = 'prepared' in batch ? batch.prepared : await prepareBatch(batch);
  const workflowId = batchWorkflowId(input.batchId);
  const existing = await describeBatch(client, workflowId);
  // A price given is never below what the service charged; a cap is kept only with a price for every model: both
  // checked before anything starts (not when attaching).
  if (existing?.status.name !== 'RUNNING') {
    if (!pricesChecked) await checkDeclaredPrices(ledger, input.prices);
    if (input.spendCapUsd !== undefined) await checkPricesForCap(client, taskQueue, report.models, input.prices ?? {});
  }
  // The errors.csv of a batch that is still open: that batch starts its rows itself, never a second run of them.
  for (const source of report.sourceBatches) {
    if (source === input.batchId) continue;
    const open = await describeBatch(client, batchWorkflowId(source));
    if (open?.status.name === 'RUNNING') throw new BatchSourceOpenError(input.file, source);
  }
  const memoFingerprint = asFingerprint((existing?.memo as { fingerprint?: unknown } | undefined)?.fingerprint);
  if (memoFingerprint && !sameFingerprint(memoFingerprint, fingerprint)) {
    const where = `Temporal's memo of ${workflowId}, started ${existing!.startTime.toISOString()}`;
    const difference = `its file was ${describeFingerprint(memoFingerprint)}, and it is now ${describeFingerprint(fingerprint)}`;
    throw new BatchFileChangedError(input.batchId, input.file, difference, where);
  }
  // A batch of an earlier version kept its ledger in its output folder: taken into the store first.
  await importOutputFolder(ledger, input.outDir, env);
  const asks = batchAsks(input);
  const recorded = await ledger.batches(input.batchId);
  for (const start of recorded) {
    const difference = contentDifference(start, fingerprint, asks);
    if (difference) {
      throw new BatchFileChangedError(
        input.batchId,
        input.file,
        difference,
        `the ledger store ${ledger.location} at ${start.at}`,
      );
    }
  }
  if (recorded.length === 0 || recorded.at(-1)!.outDir !== input.outDir || recorded.at(-1)!.file !== input.file) {
    await ledger.append([
      { type: 'batch', batchId: input.batchId, file: input.file, fingerprint, outDir: input.outDir, ...asks },
    ]);
  }
  const started: BatchWorkflowInput = {
    ...input,
    ledger: {
      storeId: ledger.id,
      storeLocation: ledger.location,
      storeKeys: await ledger.lastKeyPosition(),
      ...(asks.newImages ? { newImages: true } : {}),
    },
  };
  const handle = await client.workflow.start(batchWorkflow, {
    workflowId,
    taskQueue,
    args: [started],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    memo: {
      batchId: input.batchId,
      file: input.file,
      outDir: input.outDir,
      defaultModel: input.defaultModel ?? '',
      fingerprint,
    },
  });
  return { handle, attached: existing?.status.name === 'RUNNING', report };
}

/** The latest run of a batch workflow, if Temporal still has one. */
async function describeBatch(client: Client, workflowId: string): Promise<WorkflowExecutionDescription | undefined> {
  try {
    return await client.workflow.getHandle(workflowId).describe();
  } catch {
    return undefined;
  }
}

/** A memo's fingerprint; a batch started before fingerprints has none, and is not compared. */
function asFingerprint(value: unknown): FileFingerprint | undefined {
  const fp = value as Partial<FileFingerprint> | null | undefined;
  return typeof fp?.size === 'number' && typeof fp.sha256 === 'string'
    ? { size: fp.size, sha256: fp.sha256 }
    : undefined;
}

/**
 * Longest wait for a running batch to answer a progress query. A query is answered by a worker: without one the
 * server would hold the call for 30 s and then fail with a vague "Failed to query Workflow".
 */
export const QUERY_TIMEOUT_MS = 10_000;

/** A running batch did not answer its progress query in time: most likely no worker polls its task queue. */
export class BatchNoAnswerError extends ImagebatchError {
  readonly code = ErrorCode.BatchNoAnswer;
  constructor(
    readonly batchId: string,
    readonly waitedMs: number,
  ) {
    super(
      `batch ${batchId} did not answer within ${Math.round(waitedMs / 1000)} s: is a worker running ` +
        '(imagebatch worker, with the same TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_TASK_QUEUE)?',
    );
  }
}

/** The progress of a running batch, asked with a deadline; a batch nobody answers for is a BatchNoAnswerError. */
export async function queryProgress(
  handle: WorkflowHandle,
  batchId: string,
  timeoutMs: number = QUERY_TIMEOUT_MS,
): Promise<BatchProgress> {
  const deadline = Date.now() + timeoutMs;
  try {
    return await handle.client.withDeadline(deadline, () => handle.query(progressQuery));
  } catch (err) {
    // The deadline shows as DEADLINE_EXCEEDED somewhere on the cause chain, or only as a failed query that came
    // back once the deadline had passed (seen under vitest): either way, nobody answered in time.
    if (isDeadlineExceeded(err) || Date.now() >= deadline) throw new BatchNoAnswerError(batchId, timeoutMs);
    throw err;
  }
}

/** Whether a gRPC status code in `codes` is on the error or anywhere on its cause chain (the client wraps it). */
function hasGrpcCode(err: unknown, codes: readonly number[]): boolean {
  for (let e: unknown = err, depth = 0; typeof e === 'object' && e !== null && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && codes.includes(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** gRPC's DEADLINE_EXCEEDED (code 4). */
const isDeadlineExceeded = (err: unknown) => hasGrpcCode(err, [4]);

/**
 * A failure of the connection to Temporal that passes: DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED or UNAVAILABLE (a
 * cluster's history or matching service restarting, the local server starting again).
 */
const isPassingOutage = (err: unknown) => hasGrpcCode(err, [4, 8, 14]);

/** How long {@link followBatch} waits before asking again for a result that an outage interrupted. */
const OUTAGE_RETRY_MS = 1_000;

/**
 * The batch's result, asked again while Temporal is briefly out of reach: the batch runs on, and only its end (or a
 * failure of the batch itself) ends the wait.
 */
async function resultThroughOutages(
  handle: WorkflowHandle<typeof batchWorkflow>,
  signal: AbortSignal | undefined,
): Promise<BatchProgress> {
  for (;;) {
    try {
      return await handle.result();
    } catch (err) {
      if (signal?.aborted || !isPassingOutage(err)) throw err;
      await delay(OUTAGE_RETRY_MS);
    }
  }
}

/** Options of {@link followBatch}. */
export interface FollowOptions {
  /**
   * Time between two progress queries.
   * @default 500
   */
  intervalMs?: number;
  /** Aborted on Ctrl-C: the wait ends at once. */
  signal?: AbortSignal;
  /**
   * Longest wait for one progress query.
   * @default QUERY_TIMEOUT_MS
   */
  queryTimeoutMs?: number;
  /**
   * Called once when the batch has not answered for `queryTimeoutMs` (no worker?), and again after it answers
   * and falls silent again. Following goes on: the batch carries on as soon as a worker runs.
   * @default nothing
   */
  onNoAnswer?: (err: BatchNoAnswerError) => void;
}

/**
 * Follows a batch until it ends: calls `onProgress` every `intervalMs`, returns the final progress. Following has
 * no bound of its own (a batch runs as long as its rows need); Ctrl-C ends it, a batch that nobody answers for is
 * reported through `onNoAnswer`, and an outage of Temporal (UNAVAILABLE and the like) is waited out.
 */
export async function followBatch(
  handle: WorkflowHandle<typeof batchWorkflow>,
  onProgress: (p: BatchProgress) => void,
  options: FollowOptions = {},
): Promise<BatchProgress> {
  let finished = false;
  let silent = false;
  const result = resultThroughOutages(handle, options.signal).finally(() => (finished = true));
  while (!finished) {
    if (options.signal?.aborted) throw new Error('interrupted');
    try {
      onProgress(await queryProgress(handle, handle.workflowId.replace(/^batch\//, ''), options.queryTimeoutMs));
      silent = false;
    } catch (err) {
      // No worker answers: say so once. Otherwise the run may be between two continue-as-new hops or just
      // ending: ask again next time.
      if (err instanceof BatchNoAnswerError && !silent && !finished) options.onNoAnswer?.(err);
      if (err instanceof BatchNoAnswerError) silent = true;
    }
    await Promise.race([result.catch(() => undefined), delay(options.intervalMs ?? 500)]);
  }
  const final = await result;
  onProgress(final);
  return final;
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
