import { describe, expect, it } from 'vitest';
import { readUsd } from '../../src/api/money';
import {
  childLocation,
  firstValueAt,
  MAX_RECORD_PATH_LENGTH,
  parseRecordPath,
  recordPathProblem,
  valuesAt,
} from '../../src/api/record-path';

const found = (record: unknown, path: string) => [...valuesAt(record, path)].map(({ value, at }) => [at, value]);

describe('record paths: the grammar', () => {
  it.each([
    ['cost_usd', [{ kind: 'name', name: 'cost_usd' }]],
    [
      'billing.amount',
      [
        { kind: 'name', name: 'billing' },
        { kind: 'name', name: 'amount' },
      ],
    ],
    ['images[].url', [{ kind: 'name', name: 'images' }, { kind: 'each' }, { kind: 'name', name: 'url' }]],
    [
      'a[0].b',
      [
        { kind: 'name', name: 'a' },
        { kind: 'index', index: 0 },
        { kind: 'name', name: 'b' },
      ],
    ],
    ['grid[1][]', [{ kind: 'name', name: 'grid' }, { kind: 'index', index: 1 }, { kind: 'each' }]],
    ['$ref-2_x', [{ kind: 'name', name: '$ref-2_x' }]],
    ['0', [{ kind: 'name', name: '0' }]],
  ])('%s is a path', (text, steps) => {
    expect(parseRecordPath(text)).toEqual({ text, steps });
    expect(recordPathProblem(text)).toBeUndefined();
  });

  it.each([
    ['', 'is empty'],
    ['a..b', 'empty field name'],
    ['.a', 'empty field name'],
    ['a.', 'empty field name'],
    ['cost usd', 'not a name'],
    ['a[x]', 'not a name'],
    ['a[-1]', 'not a name'],
    ['a[1234567]', 'not a name'],
    ['[0].url', 'not a name'],
    ['a[0', 'not a name'],
    ['a]', 'not a name'],
    ['a/b', 'not a name'],
    ['a["b"]', 'not a name'],
    ['x'.repeat(MAX_RECORD_PATH_LENGTH + 1), 'longer than'],
  ])('%j is not a path: %s', (text, problem) => {
    expect(recordPathProblem(text)).toContain(problem);
    expect(typeof parseRecordPath(text)).toBe('string');
  });

  it('a problem never quotes the path (it may be a value put in the wrong variable)', () => {
    const text = 'sk_live_secret value';
    expect(recordPathProblem(text)).not.toContain('sk_live');
  });
});

describe('record paths: reading', () => {
  const record = {
    id: 'c1',
    images: [{ url: 'u0' }, { nope: 1 }, { url: 'u2' }],
    result: { files: [{ href: 'h0' }, { href: 'h1' }] },
    grid: [
      [1, 2],
      [3, 4],
    ],
    list: ['a', 'b'],
  };

  it('reads a field, a nested field, an element and every element, with each concrete location', () => {
    expect(found(record, 'id')).toEqual([['id', 'c1']]);
    expect(found(record, 'images[].url')).toEqual([
      ['images[0].url', 'u0'],
      ['images[2].url', 'u2'],
    ]);
    expect(found(record, 'images[1]')).toEqual([['images[1]', { nope: 1 }]]);
    expect(found(record, 'result.files[].href')).toEqual([
      ['result.files[0].href', 'h0'],
      ['result.files[1].href', 'h1'],
    ]);
    expect(found(record, 'grid[][1]')).toEqual([
      ['grid[0][1]', 2],
      ['grid[1][1]', 4],
    ]);
    expect(found(record, 'list[]')).toEqual([
      ['list[0]', 'a'],
      ['list[1]', 'b'],
    ]);
    expect(firstValueAt(record, 'images[].url')).toMatchObject({ value: 'u0', at: 'images[0].url' });
  });

  it('gives the holder of each value (for an image, its width and height)', () => {
    const [first] = valuesAt(record, 'images[].url');
    expect(first?.holder).toBe(record.images[0]);
  });

  it('finds nothing where a step does not fit the value it meets', () => {
    for (const path of ['missing', 'id.x', 'images.url', 'images[9].url', 'result[0]', 'result.files[]x', 'list[].a']) {
      expect(found(record, path), path).toEqual([]);
    }
    expect(found(null, 'a')).toEqual([]);
    expect(found('text', 'length')).toEqual([]);
    expect(found([1], '0')).toEqual([]);
  });

  it('reads own fields only, never inherited ones', () => {
    const hostile = JSON.parse('{"__proto__":{"status":"x"},"a":{}}') as unknown;
    expect(found(hostile, '__proto__.status')).toEqual([['__proto__.status', 'x']]);
    expect(found({}, 'constructor')).toEqual([]);
    expect(found({ a: {} }, 'a.toString')).toEqual([]);
    expect(found([], 'length')).toEqual([]);
  });

  it('an invalid path finds nothing rather than throwing', () => {
    expect(found(record, 'images..url')).toEqual([]);
  });

  it('is lazy: a caller that wants one value does not walk a huge list', () => {
    const huge = { xs: Array.from({ length: 200_000 }, (_, i) => ({ v: i })) };
    const it = valuesAt(huge, 'xs[].v');
    expect(it.next().value).toMatchObject({ value: 0, at: 'xs[0].v' });
  });

  it('locations quote and cut field names the grammar does not allow', () => {
    expect(childLocation('', 'a')).toBe('a');
    expect(childLocation('a', 'b')).toBe('a.b');
    expect(childLocation('a', 3)).toBe('a[3]');
    expect(childLocation('a', 'odd name')).toBe('a["odd name"]');
    expect(childLocation('a', 'k'.repeat(500))).toBe(`a["${'k'.repeat(40)}..."]`);
  });

  it('money reads through it (one grammar): dotted paths as before, and now elements too', () => {
    expect(readUsd({ billing: { amount: '0.04' } }, ['billing.amount'])).toBe(0.04);
    expect(readUsd({ charges: [{ usd: 'n/a' }, { usd: 0.02 }] }, ['charges[].usd'])).toBe(0.02);
    expect(readUsd({ charges: [{ usd: 0.01 }, { usd: 0.02 }] }, ['charges[1].usd'])).toBe(0.02);
  });
});
