/** A row: one line of the batch file, run by one prompt workflow. */
import type { CreationRequest, LedgerScope, ListPrice } from './creation';

/** A valid row of the batch file, as the page reader gives it to the batch workflow. */
export interface BatchRowInput {
  rowId: string;
  line: number;
  request: CreationRequest;
}

/** The input of one prompt workflow (one row). */
export interface PromptWorkflowInput {
  batchId: string;
  rowId: string;
  /** Line of the row in the batch file, for messages. */
  line?: number;
  request: CreationRequest;
  /**
   * The request's price before it is sent (catalog, else the user's), for keys whose creation does not say what it
   * cost: a refunded key is refunded this much, a charged one charged it.
   * @default unknown
   */
  price?: ListPrice;
  /**
   * Attempts at most (each a new idempotency key). Only refunded failures start a new attempt.
   * @default 3
   */
  maxAttempts?: number;
  /** Output folder of the batch, where the images go. */
  outDir: string;
  /**
   * Longest wait for one creation to end after its acceptance, polls and waits included, before the row gives up
   * on it with a clear message.
   * @default DEFAULT_MAX_POLL_WAIT_MS (src/workflows/timeouts.ts)
   */
  maxPollWaitMs?: number;
  /**
   * Workflow id of the batch to report to; rows started alone report to nobody.
   * @default undefined
   */
  parentWorkflowId?: string;
  /**
   * While blocked by a batch-level stop, how often the row makes sure its batch still runs; a row whose batch is
   * gone ends `cancelled`.
   * @default ROW_CHECK_EVERY_MS (5 minutes)
   */
  batchCheckEveryMs?: number;
  /** The ledger store the batch was started on, and whether it asks for new images. @default none */
  ledger?: LedgerScope;
  /**
   * The batch's canary proves the key: its keys are sent a second time once the first answer is known, until one
   * such check has ended (CreateImageInput.proveKey). @default false
   */
  proveKey?: true;
}
