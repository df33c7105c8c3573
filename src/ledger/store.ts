import { ErrorCode, ImagebatchError, type CreationRequest } from '../model';
import type { BatchEvent, LedgerEvent, LedgerKey, LedgerRow, NewLedgerEvent } from './events';

/** The ledger store cannot be opened, read or written: nothing is sent while it is so. */
export class LedgerUnavailableError extends ImagebatchError {
  readonly code = ErrorCode.LedgerUnavailable;
  constructor(
    readonly location: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`the ledger store ${location} (IMAGEBATCH_LEDGER): ${message}`, options);
  }
}

/** What a row asks of the store before its key is sent (see {@link LedgerStore.decide}). */
export interface DecideInput {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
  request: CreationRequest;
  /** SHA-256 of the body bytes. */
  requestSha256: string;
  /** The request's fingerprint (see requestPrint). */
  fingerprint: string;
  /** The batch's output folder, as this worker sees it. */
  outDir: string;
  /** Whether an earlier request with the same fingerprint may serve this row (false: `--new-images`). */
  reuse: boolean;
}

/** What the store says of a key about to be sent. */
export type Decision =
  /** The key is new and no earlier request serves it: its `sending` is committed, and it may leave. */
  | { kind: 'send' }
  /** The key was sent before: what is known of it decides (followed, answered, sent again or refused). */
  | { kind: 'known'; key: LedgerKey }
  /** An earlier key with the same fingerprint serves this row (bound to it in the store): nothing is sent. */
  | { kind: 'reuse'; source: LedgerKey };

/** How {@link LedgerStore.summarize} groups keys. */
export const SummaryGroup = { Batch: 'batch', Day: 'day', Fingerprint: 'fingerprint' } as const;
export type SummaryGroup = (typeof SummaryGroup)[keyof typeof SummaryGroup];

/** What the store holds of a group of keys (a batch, a day of first sends, a request's fingerprint). */
export interface SummaryRow {
  /** The batch id, the day (YYYY-MM-DD, UTC) or the fingerprint. */
  group: string;
  keys: number;
  /** Keys that hold a charge: a creation exists, not refunded (succeeded, in flight, lost, out of time). */
  paid: number;
  /** What the service said those keys cost (USD), over the ones whose cost it showed. */
  paidUsd: number;
  /** Paid keys whose cost the service never showed: `paidUsd` leaves them out. */
  paidCostUnknown: number;
  /** Keys sent with no creation known and no end that holds nothing: in flight now, or of unknown outcome. */
  open: number;
  /** Keys whose creation failed or whose submission was refunded (502, 503): charged and refunded in full. */
  refunded: number;
  /** Keys refused without a charge (400, 404, 402). */
  refused: number;
}

/** The latest charge the store saw the service make for a model: what a declared price is checked against. */
export interface ChargeSeen {
  model: string;
  /** What the service said the key cost, over the images it asked for (USD). */
  perImageUsd: number;
  /** When the key was first sent (ms since the epoch): when it was charged. */
  atMs: number;
  batchId: string;
  rowId: string;
}

/** A page of keys, in the order they were first sent. */
export interface KeyPage {
  keys: LedgerKey[];
  /** The position after the last key given. */
  next: number;
  done: boolean;
}

/** A page of a batch's rows, in the order the store first heard of them. */
export interface RowPage {
  rows: LedgerRow[];
  /** The position after the last row given (the next call's `after`). */
  next: number;
  done: boolean;
}

/**
 * The memory of what was asked and paid, shared by every worker and command of a deployment. Temporal forgets a
 * closed workflow after its namespace's retention, and the service forgets a key after its idempotency window; the
 * store forgets nothing. Each call is one transaction, committed before it returns: a `sending` is on disk before
 * its request leaves.
 */
/** What proved a worker's settings: a batch's canary row, or doctor's paid test. */
export interface ServiceProof {
  by: 'canary' | 'doctor';
  /** The batch and row of the canary. */
  batchId?: string;
  rowId?: string;
  /** The creation that showed it. */
  creationId?: string;
  /** When (ms since the epoch); set by the store. */
  atMs?: number;
}

export interface LedgerStore {
  /** Where it is, for messages: a file, or a PostgreSQL URL without its password. */
  readonly location: string;
  /** The store's own id, made when it was created: a batch started on one store is refused by another's worker. */
  readonly id: string;
  /** Applies events, in order, in one transaction. A key event of a key never sent is ignored. */
  append(events: readonly NewLedgerEvent[], now?: number): Promise<void>;
  /**
   * Before a key is sent: the key as known, else the earlier request with the same fingerprint that serves the row
   * (bound to the row, one row of a batch per earlier key), else the key's `sending`, committed. Decided under a lock
   * of the fingerprint, so two rows of any batches on any hosts never both send one request they could share.
   */
  decide(input: DecideInput, now?: number): Promise<Decision>;
  /** Unbinds a row from an earlier key that ended holding nothing (refused or refunded): the row decides again. */
  unbind(batchId: string, rowId: string, sourceKey: string): Promise<void>;
  key(idempotencyKey: string): Promise<LedgerKey | undefined>;
  row(batchId: string, rowId: string): Promise<LedgerRow | undefined>;
  /** The rows of a batch among `rowIds` that the store knows, by row id. */
  rowsOf(batchId: string, rowIds: readonly string[]): Promise<Map<string, LedgerRow>>;
  /** The batch's rows after position `after` (0 at first), `limit` at most. */
  rows(batchId: string, after: number, limit: number): Promise<RowPage>;
  /** The batch's start events, oldest first. */
  batches(batchId: string): Promise<BatchEvent[]>;
  /** What the store holds, grouped by batch, by day of first send, or by fingerprint; of one batch when given. */
  summarize(by: SummaryGroup, batchId?: string): Promise<SummaryRow[]>;
  /**
   * For each fingerprint, how many keys of it (any batch) hold, or may hold, a charge: requests paid before that can
   * serve rows asking the same. Fingerprints with none are left out.
   */
  paidCounts(fingerprints: readonly string[]): Promise<Map<string, number>>;
  /** For each of `models`, the latest charge whose cost the service showed (any batch); models never charged are left out. */
  chargesSeen(models: readonly string[]): Promise<Map<string, ChargeSeen>>;
  /** Keys after position `after` (0 at first), `limit` at most; of one batch when given. */
  keys(after: number, limit: number, batchId?: string): Promise<KeyPage>;
  /** The position of the last key recorded (any batch; 0 when none): keys recorded later come after it. */
  lastKeyPosition(): Promise<number>;
  /** The latest proof that a worker with these settings (their fingerprint) understood the service, if any. */
  serviceProof(settings: string): Promise<ServiceProof | undefined>;
  /** Records such a proof (the latest one is kept). */
  proveService(settings: string, proof: ServiceProof, now?: number): Promise<void>;
  /** Bytes of a `ledger.jsonl` file imported so far (jsonl.ts). */
  importedBytes(file: string): Promise<number>;
  /** Applies events read from a `ledger.jsonl` file, and how far it was read, in one transaction. */
  importEvents(file: string, events: readonly LedgerEvent[], bytes: number, now?: number): Promise<void>;
  close(): Promise<void>;
}

/** Every row of a batch the store knows, page after page (a batch of millions of rows never sits in memory). */
export async function* eachRow(store: LedgerStore, batchId: string, pageSize = 1000): AsyncGenerator<LedgerRow> {
  for (let after = 0; ;) {
    const page = await store.rows(batchId, after, pageSize);
    yield* page.rows;
    if (page.done) return;
    after = page.next;
  }
}
