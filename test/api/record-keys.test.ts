import { describe, expect, it } from 'vitest';
import { MAX_RECORD_KEY_LENGTH, MAX_RECORD_KEYS, recordKeysOf } from '../../src/api/record-keys';
import { poll } from './helpers/poll';

/** A success without an image names the record's top-level fields: names only, bounded, never a value. */
describe('recordKeysOf', () => {
  it('lists the top-level names in order, never a value, nested names not at all', () => {
    expect(recordKeysOf({ id: 'c', status: 'done', result: { files: ['https://x/secret.png'] }, n: 0 })).toEqual([
      'id',
      'status',
      'result',
      'n',
    ]);
    expect(recordKeysOf(null)).toEqual([]);
    expect(recordKeysOf(['a'])).toEqual([]);
    expect(recordKeysOf('text')).toEqual([]);
  });

  it('bounds how many names and how long each, and removes control characters', () => {
    const many = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`field_${i}`, i]));
    const keys = recordKeysOf(many);
    expect(keys).toHaveLength(MAX_RECORD_KEYS + 1);
    expect(keys.at(-1)).toBe(`…(+${300 - MAX_RECORD_KEYS} more)`);
    const long = recordKeysOf({ ['x'.repeat(10_000)]: 1, 'a\u001b[2Jb': 2 });
    expect(long[0]).toHaveLength(MAX_RECORD_KEY_LENGTH);
    expect(long[0]?.endsWith('…')).toBe(true);
    expect(long[1]).toBe('a?[2Jb');
  });
});

describe('classifyResponse: a success', () => {
  it('with no image carries the record field names (never values); with images, none', () => {
    const none = poll({ id: 'c', status: 'succeeded', note: 'private words', billing: { amount: 1 } });
    expect(none).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded', images: [] } });
    const keys = none.kind === 'ended' && none.result.outcome === 'succeeded' ? none.result.recordKeys : undefined;
    expect(keys).toEqual(['id', 'status', 'note', 'billing']);
    expect(JSON.stringify(none)).not.toContain('private words');
    const some = poll({ id: 'c', status: 'succeeded', images: [{ url: 'https://files.example/c-0.png' }] });
    expect(some).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded' } });
    expect(some).not.toHaveProperty('result.recordKeys');
  });
});
