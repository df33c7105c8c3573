import { describe, expect, it } from 'vitest';
import { paidBeforeLine } from '../../src/cli/paid-before';

/** What `run` and `validate --catalog` say before a batch's first request. */
const catalog = [
  { id: 'flux-dev', priceUsd: 0.04 },
  { id: 'sdxl' }, // listed, no price shown
];

describe('the line said before a batch starts', () => {
  it('counts the rows paid before and the new ones, with their price', () => {
    const line = paidBeforeLine(
      {
        rows: 1632,
        paid: { 'flux-dev': { rows: 1600, images: 1600 } },
        fresh: { 'flux-dev': { rows: 32, images: 32 } },
      },
      catalog,
      {},
    );
    expect(line).toBe('1,632 rows: 1,600 already paid (reused, $0.00), 32 new (about $1.28 at the catalog price)');
  });

  it('says a price nobody showed is unknown, never 0; and a user price is named as such', () => {
    const fresh = { 'flux-dev': { rows: 2, images: 2 }, sdxl: { rows: 3, images: 3 } };
    expect(paidBeforeLine({ rows: 5, paid: {}, fresh }, catalog, {})).toBe(
      '5 rows: 0 already paid (reused, $0.00), 5 new (about $0.08 at the catalog price, and 3 rows of sdxl at a ' +
        'price nobody showed)',
    );
    expect(paidBeforeLine({ rows: 5, paid: {}, fresh }, catalog, { sdxl: 0.02 })).toBe(
      '5 rows: 0 already paid (reused, $0.00), 5 new (about $0.14 at the catalog and your prices)',
    );
    expect(paidBeforeLine({ rows: 5, paid: {}, fresh }, undefined, {})).toBe(
      '5 rows: 0 already paid (reused, $0.00), 5 new (price not known: the catalog could not be read)',
    );
  });

  it('nothing new costs $0.00; --new-images says every row is new', () => {
    const all = { 'flux-dev': { rows: 1, images: 1 } };
    expect(paidBeforeLine({ rows: 1, paid: all, fresh: {} }, catalog, {})).toBe(
      '1 row: 1 already paid (reused, $0.00), 0 new ($0.00)',
    );
    expect(paidBeforeLine({ rows: 1, paid: {}, fresh: all }, catalog, {}, true)).toBe(
      '1 row, all new (--new-images) (about $0.04 at the catalog price)',
    );
  });

  it('rows that ran before in the batch are said apart, with or without --new-images: they send nothing new', () => {
    const two = { 'flux-dev': { rows: 2, images: 2 } };
    const one = { 'flux-dev': { rows: 1, images: 1 } };
    expect(paidBeforeLine({ rows: 3, paid: {}, fresh: one, earlier: two }, catalog, {}, true)).toBe(
      '3 rows: 2 ran before in this batch (counted from their records), 1 new (--new-images) (about $0.04 at the ' +
        'catalog price)',
    );
    expect(paidBeforeLine({ rows: 2, paid: {}, fresh: {}, earlier: two }, catalog, {}, true)).toBe(
      '2 rows: 2 ran before in this batch (counted from their records), 0 new (--new-images) ($0.00)',
    );
    expect(paidBeforeLine({ rows: 3, paid: one, fresh: {}, earlier: two }, catalog, {})).toBe(
      '3 rows: 2 ran before in this batch (counted from their records), 1 already paid (reused, $0.00), 0 new ($0.00)',
    );
    expect(paidBeforeLine({ rows: 2, paid: {}, fresh: {}, earlier: two }, catalog, {})).toBe(
      '2 rows: 2 ran before in this batch (counted from their records), 0 new ($0.00)',
    );
  });
});
