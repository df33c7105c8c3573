import type { UserColumns } from './batch-file';

/**
 * `imagebatch ledger check`: the ledger store against the service, key by key, on a worker (the API key lives
 * there). Plain JSON: the workflow's input and result, and its activity's.
 */

/** A difference between what the store says of a key and what the service says of its creation. */
export interface LedgerCheckFinding {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
  creationId?: string;
  problem: string;
}

/** What a check looks at: every key, or one batch's. */
export interface LedgerCheckScope {
  batchId?: string;
  /** The store the command reads: a worker with another store checks nothing. */
  storeId?: string;
}

export interface LedgerCheckInput extends LedgerCheckScope {
  /** Where the last page stopped among the store's keys (0 at first). */
  after: number;
  /** Keys per page. */
  max: number;
}

/** What a page, or the whole check, found. */
export interface LedgerCheckCounts {
  /** Keys whose creation the service was asked about. */
  checked: number;
  /** Of them, those the service agrees with. */
  agree: number;
  /** Keys with no creation known: they cannot be asked by id (reconcile resolves them). */
  withoutCreation: number;
}

export interface LedgerCheckPage extends LedgerCheckCounts {
  findings: LedgerCheckFinding[];
  next: number;
  done: boolean;
}

export interface LedgerCheckSummary extends LedgerCheckCounts {
  /** All differences found. */
  findingCount: number;
  /** The first of them, at most {@link MAX_FINDINGS_LISTED}. */
  findings: LedgerCheckFinding[];
}

/** Differences a check's result lists at most (it counts them all). */
export const MAX_FINDINGS_LISTED = 1000;

/** What `run` and `validate --catalog` ask before a batch: which of its requests were paid before. */
export interface PaidRequestsInput {
  /** The batch file, as the workers see it. */
  file: string;
  defaultModel?: string;
  userColumns?: UserColumns;
  /** The batch asks for new images: nothing paid before serves it. */
  newImages?: boolean;
  /** The store the command reads: a worker with another store answers nothing. */
  storeId?: string;
  /** The batch id the rows will run under: its rows that ran before are counted from their records, not sent. */
  batchId?: string;
}

/** Rows and images per model. */
export type UsageByModel = Record<string, { rows: number; images: number }>;

/** A batch's rows split by whether their request was paid before (any batch, this one too) or is new. */
export interface PaidRequests {
  rows: number;
  paid: UsageByModel;
  fresh: UsageByModel;
  /** Rows that ran before under the batch id asked: they follow their own keys, sending nothing new. */
  earlier?: UsageByModel;
}
