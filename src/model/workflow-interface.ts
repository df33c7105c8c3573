/**
 * The workflows' interface as plain names and bounds: what activities and the CLI need to talk to a running workflow
 * without importing workflow code. src/workflows/definitions.ts builds the signals and queries from these names; a
 * name here is part of every history that carries it, so it never changes.
 */

/** The signals of the batch and row workflows. */
export const SignalName = {
  /** A person pauses the batch. */
  Pause: 'pause',
  /** A person resumes the batch. */
  Resume: 'resume',
  /** A person cancels the batch. */
  Cancel: 'cancel',
  /** Row to batch: this row has ended, with its record. */
  RowDone: 'rowDone',
  /** Row to batch: the service said the whole batch must stop. */
  RowBlocked: 'rowBlocked',
  /** Row to batch: this row still waits on a batch-level stop. */
  RowWaiting: 'rowWaiting',
  /** Row to batch: this row is about to try a new key. */
  RowNewKey: 'rowNewKey',
  /** Batch to row: carry on after a batch-level stop. */
  RowResume: 'rowResume',
} as const;
export type SignalName = (typeof SignalName)[keyof typeof SignalName];

/** The queries of the batch workflow. */
export const QueryName = {
  /** A batch's progress (`BatchProgress`). */
  Progress: 'progress',
} as const;
export type QueryName = (typeof QueryName)[keyof typeof QueryName];

/**
 * One attempt of `createImage`: one request (a submission or a poll), then, once the creation succeeded, its images
 * of up to `IMAGEGEN_MAX_DOWNLOAD_BYTES` each. Longer than the HTTP client's own bounds (connect, headers, body,
 * total deadline), so that a slow service ends an attempt as an unknown outcome the activity counts, not as a
 * Temporal timeout.
 */
export const CREATE_IMAGE_START_TO_CLOSE = '5 minutes';
