import { valuesAt } from './record-path';

/**
 * Reading a price the service may or may not show. The interface shows no price field anywhere (the creation's other
 * fields and the model record are "not shown"), so where one is read is a setting: a list of paths (see
 * `record-path.ts`), tried in order, the first that holds an amount in USD winning. Nothing found is `undefined`
 * (unknown), never 0.
 */

/**
 * Where a creation record may carry what it cost (USD, the whole creation), tried in order: `IMAGEGEN_COST_FIELDS`.
 * The first is contract-defaults.md's; the others are names services commonly use, at the root or nested.
 */
export const DEFAULT_COST_FIELDS: readonly string[] = [
  'cost_usd',
  'cost',
  'charge_usd',
  'charged_usd',
  'charge',
  'amount_usd',
  'price_usd',
  'price',
  'billing.cost_usd',
  'billing.amount_usd',
  'billing.amount',
  'usage.cost_usd',
];

/**
 * Where a model record of the catalog may carry its price (USD per image), tried in order: `IMAGEGEN_PRICE_FIELDS`.
 * The first is contract-defaults.md's.
 */
export const DEFAULT_PRICE_FIELDS: readonly string[] = [
  'price_usd',
  'price',
  'usd_per_image',
  'price_per_image_usd',
  'cost_usd',
  'pricing.usd_per_image',
  'pricing.price_usd',
  'pricing.usd',
  'pricing.per_image',
  'pricing.image',
];

/** Fields of an amount object (`{ "amount": "0.04", "currency": "USD" }`), tried in order. */
const AMOUNT_FIELDS = ['usd', 'amount_usd', 'amount', 'value'] as const;

/**
 * The first amount in USD found at one of `paths` (see `record-path.ts`) of `record`: a number, a decimal string, or an object holding one
 * (`usd`, `amount_usd`, `amount`, `value`) whose `currency`, when it says one, is USD. A negative, non-finite or
 * non-USD amount is not taken. Undefined when none is found.
 */
export function readUsd(record: unknown, paths: readonly string[]): number | undefined {
  for (const p of paths) {
    for (const { value } of valuesAt(record, p)) {
      const found = usdIn(value);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function usdIn(value: unknown): number | undefined {
  const plain = amountOf(value);
  if (plain !== undefined) return plain;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const obj = value as Record<string, unknown>;
  const currency = obj.currency ?? obj.currency_code;
  if (currency !== undefined && (typeof currency !== 'string' || currency.trim().toUpperCase() !== 'USD')) {
    return undefined;
  }
  for (const name of AMOUNT_FIELDS) {
    const inner = amountOf(obj[name]);
    if (inner !== undefined) return inner;
  }
  return undefined;
}

function amountOf(value: unknown): number | undefined {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+(\.\d+)?$/.test(value.trim())
        ? Number(value)
        : NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}
