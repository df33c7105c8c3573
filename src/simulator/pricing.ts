import { type SimulatorConfig } from './config';

/**
 * How prices appear in the HTTP bodies (config `pricing`). Creation records are built, and stored for idempotent
 * replays (and so in the state file), in contract-defaults.md's form with `cost_usd`; they are shown as the setting says only
 * when sent, so a replayed 202 looks like a fresh one under the current setting. Charges never depend on this.
 */

export type Pricing = SimulatorConfig['pricing'];
type Model = SimulatorConfig['models'][number];

/** A creation record with its `cost_usd` in place, renamed to a nested `charge` or a `cost` amount, or left out. */
export function showCost(record: object, fields: Pricing['fields'], withCost: boolean): object {
  if (fields === 'default' && withCost) return record;
  return Object.fromEntries(
    Object.entries(record).flatMap(([name, value]): [string, unknown][] => {
      if (name !== 'cost_usd') return [[name, value]];
      if (!withCost || fields === 'hidden') return [];
      if (fields === 'default') return [[name, value]];
      if (fields === 'amount') return [['cost', { amount: String(value), currency: 'USD' }]];
      return [['charge', { amount: (value as number).toFixed(6), currency: 'USD' }]];
    }),
  );
}

/** A model of the catalog as `GET /models` shows it, its id under `idField`. */
export function modelRecord(
  { price_usd: charged, listed_price_usd, id, ...rest }: Model,
  fields: Pricing['fields'],
  idField = 'id',
): object {
  const model = { [idField]: id, ...rest };
  const price_usd = listed_price_usd ?? charged;
  switch (fields) {
    case 'default':
      return { ...model, price_usd };
    case 'renamed':
      return { ...model, pricing: { usd_per_image: price_usd } };
    case 'amount':
      return { ...model, price: { amount: String(price_usd), currency: 'USD' } };
    case 'hidden':
      return model;
  }
}
