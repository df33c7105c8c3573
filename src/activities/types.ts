import type { BatchCursor } from '../batch/page-reader';

/**
 * The activity contract between workflows and the image-service activities. Workflow code imports these
 * types only. One activity attempt sends at most one request to the service, so that Temporal's task-queue
 * activity rate limit is the per-key request rate across every worker, and waits between attempts
 * (Retry-After, poll interval, backoff) are activity retries with `nextRetryDelay`: durable, and adding no
 * history events.
 */

/** The body fields a row may carry (gaps.md, "Submit request body"). */
export interface CreationRequest {
  prompt: string;
  model: string;
  negative_prompt?: string;
  width?: number;
  height?: number;
  seed?: number;
  num_images?: number;
}

export interface SubmitCreationInput {
  /** Deterministic: the same batch, row and attempt always give the same key. */
  idempotencyKey: string;
  request: CreationRequest;
}

export interface SubmitCreationResult {
  creationId: string;
  status: string;
  /** As far as the service reports it. */
  costUsd?: number;
  /** True when the service replayed an earlier acceptance (nothing charged again), if it can be told. */
  replayed?: boolean;
}

export interface PollCreationInput {
  creationId: string;
}

export interface ImageRef {
  url: string;
  width?: number;
  height?: number;
}

/** A creation that has ended. In-flight creations never come back: the activity retries until they end. */
export type PollCreationResult =
  | { outcome: 'succeeded'; status: string; costUsd?: number; images: ImageRef[] }
  | { outcome: 'failed'; status: string; costUsd?: number; error: string; retryable: boolean };

export interface DownloadImagesInput {
  batchId: string;
  rowId: string;
  creationId: string;
  images: ImageRef[];
  /** Output folder of the batch (the worker's own folder when relative). */
  outDir: string;
}

export interface DownloadedImage {
  url: string;
  /** Path of the file, relative to the batch's output folder. */
  path: string;
  sha256: string;
  bytes: number;
}

export interface ModelInfo {
  id: string;
  name?: string;
  priceUsd?: number;
}

/**
 * Poll a creation until it ends and, on success, download its images, in one activity: every poll attempt is
 * still one request to the service (in-flight answers retry the activity after the poll interval), and a row's
 * happy path needs two activities rather than three (17 history events instead of 23).
 */
export interface CollectCreationInput {
  creationId: string;
  batchId: string;
  rowId: string;
  outDir: string;
  /**
   * When the creation succeeded, signal this summary to the batch before returning. The row's report then costs
   * its workflow no history events of its own (a row of a batch stays at 19 events on its happy path).
   */
  reportOnSuccess?: { parentWorkflowId: string; summary: RowSummaryLike };
}

export interface CollectCreationResult {
  poll: PollCreationResult;
  /** Empty unless the creation succeeded. */
  images: DownloadedImage[];
}

/** Where the page reader stopped: the next page starts exactly here. Opaque to workflows. */
export type { BatchCursor };

export interface ReadBatchPageInput {
  /** Path of the batch file, as the worker sees it. */
  file: string;
  /** Undefined for the first page. */
  cursor?: BatchCursor;
  /** Rows per page at most. */
  maxRows: number;
  /** Model for rows without a `model` column value. */
  defaultModel?: string;
}

export interface BatchRowInput {
  rowId: string;
  line: number;
  request: CreationRequest;
}

export interface ReadBatchPageResult {
  rows: BatchRowInput[];
  /** Rows of this page that were invalid (never started; `imagebatch validate` lists them). */
  invalidRows: number;
  nextCursor: BatchCursor;
  done: boolean;
}

/** What an existing row workflow says about itself (a batch started again over rows that already exist). */
export type RowLookup = { status: 'running' } | { status: 'closed'; summary?: RowSummaryLike };

export interface RowSummaryLike {
  rowId: string;
  state: string;
  chargedUsd: number;
  refundedUsd: number;
  attempts: number;
}
