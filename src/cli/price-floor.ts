import type { ChargeSeen, LedgerStore } from '../ledger';
import { ErrorCode } from '../model/errors';
import { PriceOptionError } from './prices';

/**
 * A price the user declares is checked, not trusted: below what the ledger store saw the service charge for the
 * same model (its latest charge whose cost the service showed), it is refused before anything starts. A cap counted
 * at a price that is too low would let the batch spend past it.
 */

/** A declared price below the latest charge the store saw for its model. Exit 2 (usage); nothing was started. */
export class PriceBelowChargedError extends PriceOptionError {
  override readonly code = ErrorCode.PriceBelowCharged;
  constructor(
    readonly below: readonly { given: number; seen: ChargeSeen }[],
    location: string,
  ) {
    const each = below.map(
      ({ given, seen }) =>
        `${seen.model} at $${given} per image, and the service charged $${seen.perImageUsd} on ` +
        `${new Date(seen.atMs).toISOString().slice(0, 10)} (batch ${seen.batchId}, row ${seen.rowId})`,
    );
    const fix = below.map(({ seen }) => `--price ${seen.model}=${seen.perImageUsd}`).join(' ');
    super(
      '--price',
      `a price is below what the ledger store ${location} saw the service charge: ${each.join('; ')}. A spend ` +
        `cap counted at it could be passed; give ${fix} or more, or no price for ${below.length === 1 ? 'it' : 'them'}; ` +
        'nothing was started',
    );
  }
}

/** Refuses the declared prices ({@link PriceBelowChargedError}) that are below the store's latest charge of their model. */
export async function checkDeclaredPrices(
  ledger: LedgerStore,
  prices: Readonly<Record<string, number>> | undefined,
): Promise<void> {
  const models = Object.keys(prices ?? {});
  if (!prices || models.length === 0) return;
  const seen = await ledger.chargesSeen(models);
  const below = models.flatMap((model) => {
    const charge = seen.get(model);
    return charge && prices[model]! < charge.perImageUsd ? [{ given: prices[model]!, seen: charge }] : [];
  });
  if (below.length > 0) throw new PriceBelowChargedError(below, ledger.location);
}
