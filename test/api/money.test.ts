import { describe, expect, it } from 'vitest';
import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS, readUsd } from '../../src/api/money';
import { parseModels } from '../../src/api/schemas';

describe('readUsd: a price the service may or may not show', () => {
  it.each([
    ['contract-defaults.md', { cost_usd: 0.04 }, 0.04],
    ['a decimal string', { cost_usd: '0.040000' }, 0.04],
    ['another name', { cost: 0.02 }, 0.02],
    ['an amount object in USD', { charge: { amount: '0.040000', currency: 'USD' } }, 0.04],
    ['the cost as an amount object with a string amount', { cost: { amount: '0.04', currency: 'USD' } }, 0.04],
    ['a currency in lower case', { cost: { amount: '0.04', currency: 'usd' } }, 0.04],
    ['an amount object without a currency', { charge: { amount: 0.05 } }, 0.05],
    ['nested', { billing: { amount_usd: 0.03 } }, 0.03],
    ['zero is a price', { cost_usd: 0 }, 0],
  ])('reads %s', (_, record, usd) => {
    expect(readUsd(record, DEFAULT_COST_FIELDS)).toBe(usd);
  });

  it.each([
    ['nothing', {}],
    ['another currency', { charge: { amount: 0.04, currency: 'EUR' } }],
    ['the cost in another currency, its amount a string', { cost: { amount: '0.04', currency: 'EUR' } }],
    ['a negative amount', { cost_usd: -0.04 }],
    ['not a number', { cost_usd: 'free' }],
    ['null', { cost_usd: null }],
    ['an array', { cost_usd: [0.04] }],
    ['a name nobody configured', { fee_micros: 40_000 }],
  ])('says nothing (unknown, not 0) for %s', (_, record) => {
    expect(readUsd(record, DEFAULT_COST_FIELDS)).toBeUndefined();
  });

  it('tries the paths in order, and only those given', () => {
    const record = { price: 0.5, cost_usd: 0.04, fee: { usd: 0.07 } };
    expect(readUsd(record, ['cost_usd', 'price'])).toBe(0.04);
    expect(readUsd(record, ['fee'])).toBe(0.07);
    expect(readUsd(record, ['fee.usd'])).toBe(0.07);
    expect(readUsd(record, ['missing'])).toBeUndefined();
  });

  it('the catalog: a model that shows no price has none (unknown), not 0', () => {
    const models = parseModels(
      { models: [{ id: 'a', pricing: { usd_per_image: 0.04 } }, { id: 'b', price_usd: '0.01' }, { id: 'c' }] },
      DEFAULT_PRICE_FIELDS,
    );
    expect(models).toEqual([{ id: 'a', priceUsd: 0.04 }, { id: 'b', priceUsd: 0.01 }, { id: 'c' }]);
    expect(parseModels({ data: [{ id: 'a', rate: 0.04 }] }, ['rate'])).toEqual([{ id: 'a', priceUsd: 0.04 }]);
  });
});
