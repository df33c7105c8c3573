/**
 * The record of one row as its keys end: a plain class with no Temporal in it (the row workflow only calls it), so
 * every rule of the record is tested on its own. Workflow code imports it: no I/O, no Node built-ins.
 */
import {
  HOLDS_CHARGE,
  KeyOutcome,
  NO_MONEY_HELD,
  REFUNDED_IN_FULL,
  rowMoney,
  RowState,
  type KeyCheck,
  type KeyProgress,
  type KeyRecord,
  type ListPrice,
  type PromptWorkflowInput,
  type ReusedFrom,
  type RowRecord,
} from '../model';

/** Builds one row's record as its keys end. Not the ledger: that is the store (src/ledger), which the record goes to. */
export class RowRecordBuilder {
  readonly record: RowRecord;
  /** Set when what ended the row would end it again as it is (a rejection, the safety filter). */
  private finalAsIs = false;

  /** The request's list price (catalog, else the user's): the charge of a key whose creation says none. */
  private readonly listPrice: ListPrice | undefined;

  constructor(input: Pick<PromptWorkflowInput, 'batchId' | 'rowId' | 'line' | 'request' | 'price'>) {
    this.listPrice = input.price;
    this.record = {
      batchId: input.batchId,
      rowId: input.rowId,
      ...(input.line === undefined ? {} : { line: input.line }),
      state: RowState.Unknown,
      prompt: input.request.prompt,
      model: input.request.model,
      keys: [],
      creationIds: [],
      images: [],
      chargedUsd: 0,
      refundedUsd: 0,
      netUsd: 0,
      resubmittable: false,
    };
  }

  /**
   * A builder that carries on from a record already written (reconcile resolves its last key). The record is copied:
   * the one given is left as it was.
   */
  static resume(record: RowRecord, price?: ListPrice): RowRecordBuilder {
    const builder = new RowRecordBuilder({
      ...(price ? { price } : {}),
      batchId: record.batchId,
      rowId: record.rowId,
      ...(record.line === undefined ? {} : { line: record.line }),
      request: { prompt: record.prompt, model: record.model },
    });
    Object.assign(builder.record, JSON.parse(JSON.stringify(record)) as RowRecord);
    return builder;
  }

  /** The key in play: the last one started. */
  get current(): KeyRecord | undefined {
    return this.record.keys.at(-1);
  }

  /** A new key: its outcome is not known until it ends. */
  startKey(attempt: number, idempotencyKey: string): KeyRecord {
    const key: KeyRecord = { attempt, idempotencyKey, outcome: KeyOutcome.Submitting };
    this.record.keys.push(key);
    return key;
  }

  /** What an activity learned of the current key (its creation and price), also when it failed. */
  learned(progress: KeyProgress): void {
    const key = this.current;
    if (!key) return;
    if (progress.notFoundPolls) key.notFoundPolls = progress.notFoundPolls;
    if (progress.creationId) {
      if (key.creationId !== progress.creationId) {
        key.creationId = progress.creationId;
        this.record.creationIds.push(progress.creationId);
      }
      if (key.outcome === KeyOutcome.Submitting) key.outcome = KeyOutcome.Accepted;
      if (progress.costUsd !== undefined) {
        key.chargedUsd = progress.costUsd;
        key.priceSource = 'creation';
      }
    }
    if (progress.keyCheck) this.keyChecked(progress.keyCheck);
    const replay = progress.notFoundReplay;
    if (replay?.state === 'other' && replay.creationId) {
      const cost = replay.costUsd === undefined ? {} : { costUsd: replay.costUsd };
      this.secondCreation({ creationId: replay.creationId, ...cost }, replay.message ?? replay.tried);
    }
  }

  /**
   * The check of the current key sent a second time (a canary that proves the key), once. A second creation it paid
   * for goes in as an entry of its own (the same attempt and key, `duplicate`, holding its charge), before the key.
   */
  keyChecked(check: KeyCheck): void {
    if (this.record.keyCheck || !this.current) return;
    this.record.keyCheck = check;
    if (check.duplicate) this.secondCreation(check.duplicate, check.message);
  }

  /**
   * A second creation the service made for the current key sent again (it did not honour or keep the key): an entry
   * of its own (the same attempt and key, `duplicate`, holding its charge), before the key; once per creation.
   */
  private secondCreation(second: { creationId: string; costUsd?: number }, error: string): void {
    const key = this.current;
    const { creationId, costUsd } = second;
    if (!key || this.record.keys.some((k) => k.outcome === KeyOutcome.Duplicate && k.creationId === creationId)) return;
    const entry: KeyRecord = {
      attempt: key.attempt,
      idempotencyKey: key.idempotencyKey,
      outcome: KeyOutcome.Duplicate,
      creationId,
      ...(costUsd === undefined ? {} : { chargedUsd: costUsd, priceSource: 'creation' as const }),
      error,
    };
    this.priceKey(entry);
    this.record.keys.splice(this.record.keys.length - 1, 0, entry);
    this.record.creationIds.push(creationId);
    Object.assign(this.record, rowMoney(this.record.keys));
  }

  /** The creation succeeded and its images are saved. */
  succeeded(creationId: string, costUsd: number | undefined, images: RowRecord['images']): void {
    this.learned({ creationId, ...(costUsd === undefined ? {} : { costUsd }) });
    this.endKey(KeyOutcome.Succeeded);
    this.record.images = images;
    this.finish(RowState.Succeeded);
  }

  /**
   * An earlier request with the same fingerprint served the row: the key in play was never sent and leaves the
   * record, and nothing is charged here. With its images saved, the row is `reused`; without, `images_unsaved` when
   * that creation succeeded (`generated`), else `unknown`, and `error` says why and where to resolve it.
   */
  reused(from: ReusedFrom, images: RowRecord['images'], error?: string, generated = false): void {
    const key = this.current;
    if (key?.outcome === KeyOutcome.Submitting) this.record.keys.pop();
    this.record.reusedFrom = from;
    if (from.creationId && !this.record.creationIds.includes(from.creationId)) {
      this.record.creationIds.push(from.creationId);
    }
    this.record.images = images;
    if (images.length > 0) {
      this.finish(RowState.Reused);
      return;
    }
    this.record.error = error ?? 'the earlier request that served the row left no image';
    this.finish(generated ? RowState.ImagesUnsaved : RowState.Unknown);
  }

  /** The creation failed and was refunded in full: `retryable` says whether a new key may be tried. */
  creationFailed(creationId: string, costUsd: number | undefined, error: string, retryable: boolean): void {
    this.learned({ creationId, ...(costUsd === undefined ? {} : { costUsd }) });
    this.endKey(KeyOutcome.Failed, error);
    this.record.error = error;
    this.finalAsIs = !retryable;
  }

  /** The submission of the current key was charged and refunded (502, 503): a new key may follow. */
  refunded(error: string): void {
    this.endKey(KeyOutcome.Refunded, error);
    this.record.error = error;
  }

  /** 402 on the current key: judged and not charged; the next try needs a new key. */
  declined(error: string): void {
    this.endKey(KeyOutcome.Declined, error);
    this.record.error = error;
  }

  /** The current key was refused on its merits (400, 404 model): the row fails as it is. */
  rejected(error: string): void {
    this.endKey(KeyOutcome.Rejected, error);
    this.finalAsIs = true;
    this.fail(error);
  }

  /** The creation failed with an error that would end it again as it is (the safety filter): the row fails. */
  failedAsIs(): void {
    this.fail(this.record.error ?? 'failed');
  }

  /** The last key ended refunded and no new key follows (reconcile sends none): the row fails; another run may pass. */
  endedRefunded(): void {
    this.fail(this.record.error ?? 'failed');
  }

  /** Refunded failures up to the limit: the row fails; another run may succeed. */
  gaveUp(maxAttempts: number): void {
    this.fail(`${this.record.error ?? 'failed'} (gave up after ${maxAttempts} attempts)`);
  }

  /** The current key's outcome is not known (no answer, lost, still running at the maximum wait). */
  unknown(
    outcome: typeof KeyOutcome.Unknown | typeof KeyOutcome.Lost | typeof KeyOutcome.TimedOut,
    error: string,
  ): void {
    this.endKey(outcome, error);
    this.record.error = error;
    this.finish(RowState.Unknown);
  }

  /**
   * No send of the current key ever left (connection refused, a failed name lookup, the connect timeout): it charged
   * nothing, and the row fails, safe to submit again once the service can be reached.
   */
  notSent(error: string): void {
    this.endKey(KeyOutcome.NotSent, error);
    this.fail(error);
  }

  /** Paid and generated, but the images could not be saved. */
  imagesUnsaved(error: string): void {
    this.endKey(KeyOutcome.Succeeded, error);
    this.record.error = error;
    this.finish(RowState.ImagesUnsaved);
  }

  /**
   * The row was stopped from outside (cancelled, or its batch is gone). A key still in play keeps what is known
   * of it: accepted (charged) if its creation is known, else unknown, since it may have been sent.
   */
  cancelled(why: string): void {
    const key = this.current;
    if (key?.outcome === KeyOutcome.Submitting) {
      key.outcome = KeyOutcome.Unknown;
      key.error = `${why} while its key was in flight: it may have been charged`;
    }
    this.record.error = why;
    this.finish(RowState.Cancelled);
  }

  /** An error nobody expected: the row ends with what is known, unknown if any key may have been charged. */
  broken(message: string): void {
    const key = this.current;
    if (key?.outcome === KeyOutcome.Submitting) key.outcome = KeyOutcome.Unknown;
    this.record.error = message;
    this.finish(this.mayBeCharged() ? RowState.Unknown : RowState.Failed);
  }

  private fail(error: string): void {
    this.record.error = error;
    this.finish(RowState.Failed);
  }

  private endKey(outcome: KeyOutcome, error?: string): KeyRecord | undefined {
    const key = this.current;
    if (!key) return undefined;
    key.outcome = outcome;
    if (error !== undefined) key.error = error;
    this.priceKey(key);
    return key;
  }

  /**
   * A key that was charged and whose creation said no cost is charged its list price, when one is known; a refunded
   * key gets back all of its charge (the interface: refunded in full), whatever its failed record says.
   */
  private priceKey(key: KeyRecord): void {
    if (!REFUNDED_IN_FULL.has(key.outcome) && !HOLDS_CHARGE.has(key.outcome)) return;
    if (key.chargedUsd === undefined && this.listPrice) {
      key.chargedUsd = this.listPrice.usd;
      key.priceSource = this.listPrice.source;
    }
    if (REFUNDED_IN_FULL.has(key.outcome) && key.chargedUsd !== undefined) key.refundedUsd = key.chargedUsd;
  }

  /** Whether any key may hold money: anything but a refused or refunded key. */
  private mayBeCharged(): boolean {
    return this.record.keys.some((k) => !NO_MONEY_HELD.has(k.outcome));
  }

  private finish(state: RowState): void {
    const r = this.record;
    r.state = state;
    for (const key of r.keys) this.priceKey(key);
    Object.assign(r, rowMoney(r.keys));
    if (state === RowState.Succeeded || state === RowState.Reused) delete r.error;
    // Submitted again only when nothing it sent may hold money, and what ended it may pass on another try.
    r.resubmittable =
      (state === RowState.Failed || state === RowState.Cancelled || state === RowState.NotRun) &&
      !this.mayBeCharged() &&
      !this.finalAsIs;
  }
}
