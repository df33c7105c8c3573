import type { CreationRequest, DownloadedImage, KeyOutcome, RowRecord, UserColumns } from '../model';

/**
 * What the ledger is told: events, each applied to the store in one transaction with the others of its call. The
 * same events made the lines of the `ledger.jsonl` files of earlier versions, which are imported once (jsonl.ts).
 */

/** Version of the event format of `ledger.jsonl` files; a line of another version is not imported. */
export const LEDGER_VERSION = 1;

/** Size and SHA-256 of a batch file: two runs with the same batch id must read the same file. */
export interface FileFingerprint {
  size: number;
  sha256: string;
}

/**
 * What a batch asks, besides its file: recorded with the batch, so that its id run again with other options never
 * attaches to it. The request template and field names are the worker's settings: each key's fingerprint holds them.
 */
export interface BatchAsks {
  /** Model of rows that name none. */
  defaultModel?: string;
  /** Columns the user owns (`--carry`, `--column`). */
  userColumns?: UserColumns;
  /** Whether the batch asked for new images of requests paid before (`--new-images`). */
  newImages?: boolean;
}

interface EventBase {
  v: typeof LEDGER_VERSION;
  /** ISO time of writing (the writer's clock). */
  at: string;
}

/** A batch started (or started again) on a file. */
export interface BatchEvent extends EventBase, BatchAsks {
  type: 'batch';
  batchId: string;
  /** The batch file as the writer saw it. */
  file: string;
  fingerprint: FileFingerprint;
  /** The output folder, as the workers see it (absent in ledgers of earlier versions). */
  outDir?: string;
}

interface KeyEventBase extends EventBase {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
}

/**
 * A key is about to be sent: written (and committed) before the request leaves. The first one carries the body;
 * every later send of the key is written too, so that a send cut off by a crash is known to have left.
 */
export interface SendingEvent extends KeyEventBase {
  type: 'sending';
  /** The request, as the row gave it: `reconcile` sends it again as it is. */
  request: CreationRequest;
  /** SHA-256 of the body bytes, without the key when the body carries it: the key is never sent with another body. */
  requestSha256: string;
  /**
   * The request's fingerprint: SHA-256 of the service's submit address and the body bytes (see
   * `requestPrint`). The same fingerprint is the same request, whatever batch, row or file asked it.
   */
  fingerprint: string;
  /** The batch's output folder, as the worker that sent it saw it: where the key's images are saved. */
  outDir?: string;
}

/**
 * A send of the key got an answer that proves the service stored nothing for it and charged nothing (429, 401, 403,
 * a local hold), or never left (connection refused, a failed name lookup: `not_sent`): that send does not start the
 * idempotency window.
 */
export interface UnseenEvent extends KeyEventBase {
  type: 'unseen';
}

/** A send of the key got no answer that can be read (no response, a timeout, a 500): it may be stored, and charged. */
export interface AmbiguousEvent extends KeyEventBase {
  type: 'ambiguous';
}

/** The service accepted the key (202): a creation exists, and it was charged. */
export interface AcceptedEvent extends KeyEventBase {
  type: 'accepted';
  creationId: string;
  costUsd?: number;
}

/** What is known of how a key ended. */
export interface EndedEvent extends KeyEventBase {
  type: 'ended';
  outcome: KeyOutcome;
  creationId?: string;
  /** What the service said the key was charged, when it said. */
  costUsd?: number;
  /** The service's words. */
  error?: string;
  /** A failed creation: whether another key may pass (every failure string but the safety filter's). */
  retryable?: boolean;
  /** The saved images of a creation that succeeded, relative to the key's output folder. */
  images?: DownloadedImage[];
}

/** A row's complete record, written as the row ends (by the row, by the batch's safety net, or by reconcile). */
export interface RowEvent extends EventBase {
  type: 'row';
  by: 'row' | 'lookup' | 'reconcile';
  record: RowRecord;
}

export type LedgerEvent =
  BatchEvent | SendingEvent | UnseenEvent | AmbiguousEvent | AcceptedEvent | EndedEvent | RowEvent;

/** The events of one key. */
export type KeyEvent = SendingEvent | UnseenEvent | AmbiguousEvent | AcceptedEvent | EndedEvent;

/** An event before it is stamped. */
export type NewLedgerEvent =
  | Omit<BatchEvent, 'v' | 'at'>
  | Omit<SendingEvent, 'v' | 'at'>
  | Omit<UnseenEvent, 'v' | 'at'>
  | Omit<AmbiguousEvent, 'v' | 'at'>
  | Omit<AcceptedEvent, 'v' | 'at'>
  | Omit<EndedEvent, 'v' | 'at'>
  | Omit<RowEvent, 'v' | 'at'>;

/** What identifies a request: its body, and the body sent to its service. */
export interface RequestPrint {
  /** SHA-256 of the body bytes. */
  requestSha256: string;
  /** SHA-256 of the submit address and the body bytes: the same request, whoever asked it. */
  fingerprint: string;
}

/** A request's print as a worker with given settings sends it. */
export type Fingerprinter = (request: CreationRequest) => RequestPrint;

/** Everything the ledger knows of one key. */
export interface LedgerKey {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
  /** When the key was first sent (ms since the epoch, the writer's clock). */
  firstSentAtMs: number;
  /**
   * Since when the service may hold the key (the first send whose answer is not known to have stored nothing): the
   * idempotency window runs from here. Undefined while every send was answered 429, 401 or 403.
   */
  mayBeStoredSinceMs?: number;
  /** A send that left and has no answer yet (or never will: the worker died). */
  pendingSinceMs?: number;
  request: CreationRequest;
  /** SHA-256 of its body bytes (see {@link SendingEvent.requestSha256}). */
  requestSha256: string;
  /** The request's fingerprint (see {@link SendingEvent.fingerprint}). */
  fingerprint: string;
  /** The output folder its images are saved in, as its worker saw it (absent for keys of earlier versions). */
  outDir?: string;
  creationId?: string;
  costUsd?: number;
  /** Its end, when known. */
  ended?: Omit<EndedEvent, 'v' | 'at' | 'type' | 'batchId' | 'rowId' | 'idempotencyKey'>;
}

/** Everything the ledger knows of one row of one batch. */
export interface LedgerRow {
  batchId: string;
  rowId: string;
  /** Its keys, in the order they were first sent. */
  keys: LedgerKey[];
  /** Its latest complete record, if one was written. */
  record?: RowRecord;
  /** Who wrote that record. */
  recordBy?: RowEvent['by'];
  /** The key of an earlier request with the same fingerprint that this row uses instead of sending its own. */
  reusedFrom?: string;
}

export function isKeyEvent(event: LedgerEvent | NewLedgerEvent): event is KeyEvent {
  switch (event.type) {
    case 'sending':
    case 'unseen':
    case 'ambiguous':
    case 'accepted':
    case 'ended':
      return true;
    case 'batch':
    case 'row':
      return false;
  }
}
