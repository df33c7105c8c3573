import { describe, expect, it } from 'vitest';
import { guessModelIdField, parseModels } from '../../src/api/catalog';
import { findRecordFields } from '../../src/api/record-findings';

/** doctor's guesses: where a catalog's model ids are, and where a record carries its fields. Runs never guess. */

const PRICE = ['price_usd'];

describe('guessModelIdField', () => {
  const bySlug = {
    data: [
      { slug: 'flux-dev', name: 'Flux Dev' },
      { slug: 'sdxl', name: 'SDXL 1.0' },
    ],
  };

  it('finds ids under a common name, which parseModels does not read unless told', () => {
    expect(parseModels(bySlug, PRICE)).toEqual([]);
    expect(guessModelIdField(bySlug, ['id'])).toEqual({ field: 'slug', by: 'name', ids: ['flux-dev', 'sdxl'] });
    expect(parseModels(bySlug, PRICE, ['slug'])?.map((m) => m.id)).toEqual(['flux-dev', 'sdxl']);
  });

  it('takes no display names for ids', () => {
    expect(guessModelIdField({ data: [{ name: 'Flux Dev' }, { name: 'SDXL 1.0' }] }, ['id'])).toBeUndefined();
  });

  it('with a model, finds the field whose values include it, nested too', () => {
    const body = [{ ref: { handle: 'flux-dev' } }, { ref: { handle: 'sdxl' } }];
    expect(guessModelIdField(body, ['id'], 'sdxl')).toEqual({
      field: 'ref.handle',
      by: 'value',
      ids: ['flux-dev', 'sdxl'],
    });
    // Numeric ids at `id`, the model's name elsewhere: the value shows where.
    expect(guessModelIdField({ models: [{ id: 7, key: 'flux-dev' }] }, ['id'], 'flux-dev')?.field).toBe('key');
  });

  it('guesses nothing when the configured paths find the ids, or there is no list', () => {
    expect(guessModelIdField({ data: [{ id: 'flux-dev', slug: 'x' }] }, ['id'])).toBeUndefined();
    expect(guessModelIdField({ data: { id: 'flux-dev' } }, ['id'])).toBeUndefined();
  });
});

describe('findRecordFields', () => {
  const reading = {
    idFields: ['id'],
    statusFields: ['status'],
    errorFields: ['error'],
    imageFields: ['images[].url'],
    costFields: ['cost_usd'],
    successStatuses: ['succeeded'],
  };

  it('names the wrapper, and the fields found under common names only', () => {
    const body = {
      data: {
        job_id: 'j1',
        state: 'COMPLETED_OK',
        amount: { amount: '0.04', currency: 'USD' },
        output: { files: [{ href: 'https://img.example/a.png' }] },
      },
    };
    expect(findRecordFields(body, reading)).toEqual({
      wrapper: 'data',
      id: { at: 'job_id', configured: false },
      status: { at: 'state', configured: false, word: 'COMPLETED_OK', meaning: 'in flight' },
      cost: { at: 'amount', configured: false, usd: 0.04 },
      images: { count: 1, at: ['output.files[0].href'], configured: false },
    });
  });
});
