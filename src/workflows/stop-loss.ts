/**
 * A batch's stop-loss, as a plain class with no Temporal in it (the batch workflow only calls it), so every rule is
 * tested on its own: a canary row first, then breakers that pause the batch when something would repeat. Its state
 * is carried across continue-as-new and stays small (a bounded window of recent rows).
 */
import {
  Breaker,
  CanaryPhase,
  KeyCheckResult,
  KeyOutcome,
  RowState,
  STOP_LOSS_DEFAULTS,
  type RowRecord,
  type StopLossOptions,
  type StopLossTrip,
  type WaitReason,
} from '../model';

export interface StopLossState {
  canary: CanaryPhase;
  /** The canary row while it is in flight. */
  canaryRowId?: string;
  /** The canary in flight was started to prove the key too (patch `canary-proves-key`): it passes only if honoured. */
  canaryProvesKey?: true;
  /** Canaries that ended `failed`. */
  canaryFailures: number;
  /** Set when a canary passed and its proof is not recorded yet: the row and its creation. */
  proofDue?: { rowId: string; creationId?: string };
  /** The recent rows that ended with an answer, newest last: `d` declined at generation as is, `-` any other. */
  recent: string;
  /** The failure the latest rows ended with as is, and how many in a row. */
  sameRun?: { error: string; rows: number };
  /** Rows of unknown outcome since the start or the last resume. */
  unknownRows: number;
  trip?: StopLossTrip;
}

/** What the batch knows of a row's charge against the price its cap counted. */
export interface PriceNote {
  model: string;
  /** USD per image the creation was charged. */
  chargedUsd: number;
  /** USD per image the cap counted for the row. */
  countedUsd: number;
}

/** The longest row error a trip quotes. */
const QUOTED_ERROR = 300;

export class StopLoss {
  private readonly o: Required<Omit<StopLossOptions, 'off'>>;
  private readonly off: ReadonlySet<Breaker>;

  constructor(
    readonly state: StopLossState,
    options: StopLossOptions = {},
  ) {
    this.o = { ...STOP_LOSS_DEFAULTS, ...withoutUndefined(options) };
    this.off = new Set(options.off ?? []);
  }

  /** The state of a new batch: its canary comes first unless it is off or the worker's settings were proven. */
  /** Whether a batch with these options sends a canary (unless its settings were proven). */
  static canaryWanted(options: StopLossOptions = {}): boolean {
    return (options.canary ?? STOP_LOSS_DEFAULTS.canary) && !(options.off ?? []).includes(Breaker.Canary);
  }

  static start(options: StopLossOptions = {}, proven = false): StopLossState {
    const on = StopLoss.canaryWanted(options);
    return {
      canary: !on ? CanaryPhase.Off : proven ? CanaryPhase.Proven : CanaryPhase.Next,
      canaryFailures: 0,
      recent: '',
      unknownRows: 0,
    };
  }

  /** Why no row may start now, if the stop-loss says so. */
  holds(): WaitReason | undefined {
    if (this.state.trip) return { kind: 'stop_loss', trip: this.state.trip };
    if (this.state.canary === CanaryPhase.Running && this.state.canaryRowId !== undefined) {
      return { kind: 'canary', rowId: this.state.canaryRowId };
    }
    return undefined;
  }

  /**
   * A row started: the canary, when the next row is to be one. `provesKey` is asked of a canary only: whether it is
   * started to prove the key too. Returns whether the row proves the key.
   */
  started(rowId: string, provesKey: () => boolean = () => false): boolean {
    if (this.state.canary !== CanaryPhase.Next) return false;
    this.state.canary = CanaryPhase.Running;
    this.state.canaryRowId = rowId;
    if (!provesKey()) return false;
    this.state.canaryProvesKey = true;
    return true;
  }

  /** A row ended with its record (counted once). `price`: its charge against the cap's price, when a cap is set. */
  ended(record: RowRecord, price?: PriceNote): void {
    if (record.rowId === this.state.canaryRowId && this.state.canary === CanaryPhase.Running) this.canaryEnded(record);
    const last = record.keys.at(-1);
    const asIs =
      record.state === RowState.Failed &&
      last !== undefined &&
      (last.outcome === KeyOutcome.Failed || last.outcome === KeyOutcome.Rejected) &&
      last.error !== undefined &&
      last.error === record.error;
    this.noteSame(asIs ? record : undefined);
    this.noteDeclined(record, asIs && last?.outcome === KeyOutcome.Failed);
    if (record.state === RowState.Unknown) this.noteUnknown(record);
    if (price) this.notePrice(record, price);
  }

  /** `resume`: the trip is cleared and every count starts afresh; a canary that tripped is followed by a new one. */
  resumed(): void {
    delete this.state.trip;
    delete this.state.sameRun;
    this.state.recent = '';
    this.state.unknownRows = 0;
    if (this.state.canary === CanaryPhase.Next) this.state.canaryFailures = 0;
  }

  /** The proof to record, once: the canary that passed. */
  takeProof(): { rowId: string; creationId?: string } | undefined {
    const due = this.state.proofDue;
    delete this.state.proofDue;
    return due;
  }

  private canaryEnded(record: RowRecord): void {
    delete this.state.canaryRowId;
    const provesKey = this.state.canaryProvesKey === true;
    delete this.state.canaryProvesKey;
    const check = record.keyCheck;
    if (provesKey && check && check.result !== KeyCheckResult.Honoured) {
      // Whatever became of the row: a key the service does not honour makes every retry of the batch pay twice.
      this.state.canary = CanaryPhase.Next;
      this.trip(Breaker.Canary, keyCheckText(record, check), record.rowId);
      return;
    }
    if (provesKey && !check && record.state === RowState.Succeeded) {
      // Nothing proved the key (its end came from the store, no request): the next row is the canary.
      this.state.canary = CanaryPhase.Next;
      return;
    }
    switch (record.state) {
      case RowState.Succeeded: {
        this.state.canary = CanaryPhase.Passed;
        const creationId = record.creationIds.at(-1);
        this.state.proofDue = { rowId: record.rowId, ...(creationId ? { creationId } : {}) };
        return;
      }
      case RowState.Reused:
      case RowState.NotRun:
        // Nothing was asked of the service: the next row is the canary.
        this.state.canary = CanaryPhase.Next;
        return;
      case RowState.Failed:
        this.state.canary = CanaryPhase.Next;
        this.state.canaryFailures += 1;
        if (this.state.canaryFailures >= this.o.canaryFailures) {
          this.trip(
            Breaker.Canary,
            `the first ${this.state.canaryFailures} rows sent alone (canaries) all failed; the last: ${quoted(record)}`,
            record.rowId,
          );
        }
        return;
      case RowState.ImagesUnsaved:
      case RowState.Unknown:
      case RowState.Cancelled:
        this.state.canary = CanaryPhase.Next;
        this.trip(
          Breaker.Canary,
          `the row sent alone (the canary) ended ${record.state}: ${quoted(record)}; the other rows wait: ` +
            'fix what it names, then resume (the next row is sent alone again)',
          record.rowId,
        );
        return;
    }
  }

  private noteSame(record: RowRecord | undefined): void {
    if (!record?.error) {
      delete this.state.sameRun;
      return;
    }
    const error = record.error.slice(0, QUOTED_ERROR);
    const rows = this.state.sameRun?.error === error ? this.state.sameRun.rows + 1 : 1;
    this.state.sameRun = { error, rows };
    if (this.o.sameRejection > 0 && rows >= this.o.sameRejection && !this.off.has(Breaker.SameRejection)) {
      this.trip(
        Breaker.SameRejection,
        `${rows} rows in a row ended with the same failure: ${quoted(record)}`,
        record.rowId,
      );
    }
  }

  private noteDeclined(record: RowRecord, declined: boolean): void {
    if (record.state === RowState.Reused || record.state === RowState.NotRun || record.state === RowState.Cancelled)
      return;
    const window = Math.max(1, Math.floor(this.o.declinedWindow));
    this.state.recent = `${this.state.recent}${declined ? 'd' : '-'}`.slice(-window);
    const count = [...this.state.recent].filter((c) => c === 'd').length;
    if (
      this.o.declinedShare > 0 &&
      this.state.recent.length >= window &&
      count >= this.o.declinedShare * window &&
      !this.off.has(Breaker.Declined)
    ) {
      this.trip(
        Breaker.Declined,
        `${count} of the last ${window} rows were declined at generation with a failure not to resubmit; the ` +
          `last: ${quoted(record)}`,
        record.rowId,
      );
    }
  }

  private noteUnknown(record: RowRecord): void {
    this.state.unknownRows += 1;
    if (this.o.unknownRows > 0 && this.state.unknownRows >= this.o.unknownRows && !this.off.has(Breaker.Unknown)) {
      this.trip(
        Breaker.Unknown,
        `${this.state.unknownRows} rows ended with an outcome not known (each may hold a charge); the last: ` +
          `${quoted(record)}; \`imagebatch reconcile\` resolves them`,
        record.rowId,
      );
    }
  }

  private notePrice(record: RowRecord, price: PriceNote): void {
    if (price.chargedUsd <= price.countedUsd * (1 + this.o.priceTolerance) + 1e-9) return;
    if (this.off.has(Breaker.PriceDiffers)) return;
    this.trip(
      Breaker.PriceDiffers,
      `a creation of ${price.model} was charged $${price.chargedUsd} per image, above the $${price.countedUsd} the ` +
        'spend cap counted; it counts the higher price from now on',
      record.rowId,
    );
  }

  private trip(breaker: Breaker, message: string, rowId: string): void {
    // The first trip stands until a resume: it says what stopped the batch.
    this.state.trip ??= { breaker, message, rowId };
  }
}

/**
 * Why a canary that proves the key paused the batch: the activity's words for its check, what the second creation it
 * paid for was charged (its own entry in the record), and what to do.
 */
function keyCheckText(record: RowRecord, check: NonNullable<RowRecord['keyCheck']>): string {
  const second = record.keys.find((k) => k.outcome === KeyOutcome.Duplicate);
  const paid = second ? ` (${second.chargedUsd === undefined ? 'its charge not known' : `$${second.chargedUsd}`})` : '';
  return `${check.message}${paid}${check.advice ? `. ${check.advice}` : ''}`;
}

function quoted(record: RowRecord): string {
  const error = record.error ?? '(no error text)';
  return `row ${record.rowId}: ${error.length > QUOTED_ERROR ? `${error.slice(0, QUOTED_ERROR)}…` : error}`;
}

function withoutUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
