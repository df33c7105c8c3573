/**
 * What a batch's prices decide: each row's price, what it reserves against the spend cap, whether the cap holds the
 * next row, and the prices the service contradicts. A plain class with no Temporal in it (the batch only calls it),
 * so its rules are tested on their own. Workflow code imports it: no I/O, no Node built-ins.
 */
import {
  roundUsd,
  type BatchRowInput,
  type ListPrice,
  type PriceSeen,
  type RowRecord,
  type WaitReason,
} from '../model';
import { chargedPerImage, committedUsd, reservedUsd, unpricedInFlight, type BatchState } from './batch-state';
import type { PriceNote } from './stop-loss';

/** What the user gave: a resume may change both, so they are read each time they are asked. */
export interface GivenPrices {
  /** @default no cap */
  spendCapUsd?: number;
  /** Prices per image (USD) by model (`--price`). @default none */
  prices?: Record<string, number>;
}

/** Slack of the cap's comparison, so that rounding never holds a row the cap allows. */
const CAP_EPSILON_USD = 1e-9;

export class BatchPrices {
  /**
   * @param state the batch's state: its catalog prices, rows in flight and spend
   * @param given the user's prices and cap (the batch's input, which a resume changes)
   * @param knownOrUnknown whether the batch runs with patch `prices-known-or-unknown`
   */
  constructor(
    private readonly state: BatchState,
    private readonly given: GivenPrices,
    readonly knownOrUnknown: boolean,
  ) {}

  /** The row's price before it is sent: the catalog's for its model, else the user's, times its images. */
  listPriceOf(row: BatchRowInput): ListPrice | undefined {
    return this.modelPrice(row.request.model, imagesOf(row));
  }

  modelPrice(model: string, images: number): ListPrice | undefined {
    const catalog = this.state.prices[model];
    if (catalog !== undefined) return { usd: roundUsd(catalog * images), source: 'catalog' };
    const user = this.given.prices?.[model];
    if (user !== undefined) return { usd: roundUsd(user * images), source: 'user' };
    return undefined;
  }

  /**
   * What the row reserves against the cap: its list price, or the price a creation of its model was charged when
   * that is higher; before the patch, 0 for a price the catalog lacked.
   */
  priceOf(row: BatchRowInput): number | null {
    const { state } = this;
    if (!this.knownOrUnknown) return (state.prices[row.request.model] ?? 0) * imagesOf(row);
    const listed = this.listPriceOf(row)?.usd;
    const seen = state.pricesSeen?.[row.request.model];
    if (listed === undefined || seen === undefined) return listed ?? null;
    return Math.max(listed, roundUsd(seen * imagesOf(row)));
  }

  /**
   * Whether the cap holds the next row back. Counted against it: the known spend, rows of unknown outcome at their
   * price, and every reservation in flight; the next row reserves its price before it starts. A price that is not
   * known (the next row's, a row's in flight, an ended row's whose spend is unknown) holds the batch: the cap could
   * not be kept.
   */
  spendCapHold(next: BatchRowInput): WaitReason | undefined {
    const { state } = this;
    const capUsd = this.given.spendCapUsd;
    if (capUsd === undefined) return undefined;
    if (!this.knownOrUnknown) {
      const projected = state.spentUsd + reservedUsd(state) + (this.priceOf(next) ?? 0);
      if (projected <= capUsd + CAP_EPSILON_USD) return undefined;
      return { kind: 'spend_cap', capUsd, spentUsd: state.spentUsd, reservedUsd: reservedUsd(state) };
    }
    const nextPrice = this.priceOf(next);
    const unpricedUsd = this.priceTheUnpriced();
    if (nextPrice === null || unpricedUsd === undefined) {
      const models = [
        next.request.model,
        ...Object.values(state.unpriced ?? {}).map((r) => r.model),
        ...Object.keys(state.unpricedEnded ?? {}),
      ];
      return {
        kind: 'price_unknown',
        capUsd,
        models: [...new Set(models)].filter((m) => !this.modelPrice(m, 1)).sort(),
      };
    }
    if (committedUsd(state) + unpricedUsd + nextPrice <= capUsd + CAP_EPSILON_USD) return undefined;
    return { kind: 'spend_cap', capUsd, spentUsd: state.spentUsd, reservedUsd: reservedUsd(state) };
  }

  /**
   * The next row's model and given price when a cap counts on a price the user gave (`--price`) that no record of
   * this batch has confirmed: the service may charge more, so one row at a time until a record shows its cost.
   */
  unconfirmedPrice(next: BatchRowInput): { model: string; givenUsd: number } | undefined {
    if (this.given.spendCapUsd === undefined || !this.knownOrUnknown) return undefined;
    const { model } = next.request;
    const listed = this.modelPrice(model, 1);
    if (listed?.source !== 'user' || this.state.pricesConfirmed?.includes(model)) return undefined;
    return { model, givenUsd: listed.usd };
  }

  /** A record whose creation showed its cost confirms its model's price (a higher one is counted: notePriceSeen). */
  notePriceConfirmed(record: RowRecord): void {
    const { state } = this;
    if (state.pricesConfirmed?.includes(record.model)) return;
    if (!record.keys.some((k) => k.priceSource === 'creation' && k.chargedUsd !== undefined)) return;
    state.pricesConfirmed = [...(state.pricesConfirmed ?? []), record.model];
  }

  /** Why the cap paused the batch, as the pause says it. */
  capHoldText(hold: WaitReason): string {
    if (hold.kind === 'price_unknown') {
      return (
        `spend cap of ${hold.capUsd} USD: no price is known for ${hold.models.join(', ')}; ` +
        `resume with --price ${hold.models[0]}=<usd per image>`
      );
    }
    return `spend cap of ${this.given.spendCapUsd} USD reached`;
  }

  /** With a spend cap, a row's charge per image against the price the cap counted for it, when above the given. */
  priceNoteOf(record: RowRecord): PriceNote | undefined {
    const { state } = this;
    const listed = this.given.spendCapUsd === undefined ? undefined : this.modelPrice(record.model, 1);
    if (!listed) return undefined;
    const chargedUsd = chargedPerImage(record, state.inFlight[record.rowId], listed.usd);
    if (chargedUsd === undefined) return undefined;
    return { model: record.model, chargedUsd, countedUsd: Math.max(listed.usd, state.pricesSeen?.[record.model] ?? 0) };
  }

  /**
   * A row whose creation was charged more per image than its model's given price: counted from now on. `allowed` is
   * asked only then (the batch asks patch `prices-seen-count` there).
   */
  notePriceSeen(record: RowRecord, allowed: () => boolean): void {
    const { state } = this;
    const listed = this.modelPrice(record.model, 1);
    if (!listed) return;
    const perImage = chargedPerImage(record, state.inFlight[record.rowId], listed.usd);
    if (perImage === undefined || perImage <= (state.pricesSeen?.[record.model] ?? 0)) return;
    if (!allowed()) return;
    state.pricesSeen = { ...state.pricesSeen, [record.model]: perImage };
  }

  /** The prices given that the service contradicts, for the progress. */
  pricesSeen(): PriceSeen[] {
    return Object.entries(this.state.pricesSeen ?? {}).flatMap(([model, chargedUsd]) => {
      const given = this.modelPrice(model, 1);
      return given && chargedUsd > given.usd ? [{ model, givenUsd: given.usd, source: given.source, chargedUsd }] : [];
    });
  }

  /**
   * Prices given since rows started without one (`resume --price`): a row in flight reserves its price now, and an
   * ended row of unknown spend counts at it. Undefined while a price is still missing.
   */
  private priceTheUnpriced(): number | undefined {
    const { state } = this;
    for (const [rowId, { model, images }] of Object.entries(state.unpriced ?? {})) {
      const price = this.modelPrice(model, images);
      if (!price || !(rowId in state.inFlight)) continue;
      state.inFlight[rowId] = price.usd;
      delete state.unpriced![rowId];
    }
    let endedUsd = 0;
    for (const [model, images] of Object.entries(state.unpricedEnded ?? {})) {
      const price = this.modelPrice(model, images);
      if (!price) return undefined;
      endedUsd += price.usd;
    }
    return unpricedInFlight(state) > 0 ? undefined : roundUsd(endedUsd);
  }
}

/** Images the row asks for. */
export function imagesOf(row: BatchRowInput): number {
  return row.request.num_images ?? 1;
}
