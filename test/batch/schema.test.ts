import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Column, ROW_ID_PATTERN } from '../../src/batch';
import { indexColumns } from '../../src/batch/header';
import { validateRow } from '../../src/batch/schema';

const COLUMNS = ['id', 'prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images'];
const index = indexColumns(COLUMNS);

function row(cells: Partial<Record<string, string>>, defaultModel?: string) {
  return validateRow({
    cells: COLUMNS.map((c) => cells[c] ?? ''),
    line: 7,
    rowNumber: 3,
    width: COLUMNS.length,
    index,
    defaultModel,
  });
}

function fieldErrors(cells: Partial<Record<string, string>>): string[] {
  const result = row({ prompt: 'p', model: 'm', ...cells });
  return result.ok ? [] : result.problems.map((p) => `${p.field}: ${p.message}`);
}

describe('row field rules (contract-defaults.md, "The submit body")', () => {
  it('builds the request from trimmed cells and leaves empty optional cells out', () => {
    const result = row({ prompt: '  a cat \n', model: ' flux ', width: ' 512 ', seed: '0', negative_prompt: '  ' });
    expect(result).toEqual({
      ok: true,
      row: { rowId: 'row-3', line: 7, request: { prompt: 'a cat', model: 'flux', width: 512, seed: 0 } },
    });
  });

  it.each([
    ['width', '256', true],
    ['width', '2048', true],
    ['width', '1024', true],
    ['width', '0512', true],
    ['width', '192', false],
    ['width', '2112', false],
    ['width', '1000', false],
    ['width', '512.0', false],
    ['width', '+512', false],
    ['width', '1e3', false],
    ['width', '-512', false],
    ['height', '2049', false],
    ['height', '320', true],
    ['seed', '0', true],
    ['seed', '4294967295', true],
    ['seed', '4294967296', false],
    ['seed', '99999999999999999999', false],
    ['seed', '1.5', false],
    ['num_images', '1', true],
    ['num_images', '4', true],
    ['num_images', '0', false],
    ['num_images', '5', false],
  ])('%s = %j is valid: %s', (field, value, valid) => {
    const errors = fieldErrors({ [field]: value });
    expect(errors.length === 0).toBe(valid);
    for (const e of errors) expect(e.startsWith(`${field}: ${field} `)).toBe(true);
  });

  it('counts prompt and negative_prompt lengths in characters (code points), after trimming', () => {
    expect(fieldErrors({ prompt: '🎨'.repeat(4000) })).toEqual([]);
    expect(fieldErrors({ prompt: ` ${'a'.repeat(4000)} ` })).toEqual([]);
    expect(fieldErrors({ prompt: 'a'.repeat(4001) })).toEqual([
      'prompt: prompt is longer than 4000 characters (got "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…")',
    ]);
    expect(fieldErrors({ prompt: ' \t ' })).toEqual(['prompt: prompt is empty']);
    expect(fieldErrors({ negative_prompt: 'é'.repeat(2000) })).toEqual([]);
    expect(fieldErrors({ negative_prompt: 'é'.repeat(2001) })).toHaveLength(1);
  });

  it('reports every bad field of a row at once, with the row id', () => {
    const result = row({ id: 'r1', prompt: '', model: 'm', width: 'x', seed: '-1', num_images: '9' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => [p.code, p.field, p.rowId])).toEqual([
      ['row.field_invalid', 'prompt', 'r1'],
      ['row.field_invalid', 'width', 'r1'],
      ['row.field_invalid', 'seed', 'r1'],
      ['row.field_invalid', 'num_images', 'r1'],
    ]);
  });

  it('uses the default model only when the model cell is empty', () => {
    expect(row({ prompt: 'p' }, 'dm')).toMatchObject({ ok: true, row: { request: { model: 'dm' } } });
    expect(row({ prompt: 'p', model: 'own' }, 'dm')).toMatchObject({ ok: true, row: { request: { model: 'own' } } });
    const missing = row({ prompt: 'p' });
    expect(missing.ok ? [] : missing.problems.map((p) => [p.code, p.field])).toEqual([['row.model_missing', 'model']]);
  });

  it('reports a ragged row only as ragged', () => {
    const result = validateRow({ cells: ['a', 'b'], line: 4, rowNumber: 1, width: 3, index, defaultModel: 'm' });
    expect(result.ok ? [] : result.problems.map((p) => p.code)).toEqual(['csv.ragged_row']);
  });

  it('accepts exactly the ids that fit a Temporal workflow id segment and a file name (never only dots, never a name Windows reserves, never a trailing dot)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme-ascii', minLength: 0, maxLength: 140 }), (id) => {
        const result = row({ id, prompt: 'p', model: 'm' });
        const trimmed = id.trim();
        const windows = /^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$/i.test(trimmed) || trimmed.endsWith('.');
        const expected = trimmed === '' || (/^[A-Za-z0-9._:-]{1,128}$/.test(trimmed) && !windows);
        expect(result.ok).toBe(expected);
        if (result.ok) expect(result.row.rowId).toBe(trimmed === '' ? 'row-3' : trimmed);
        if (result.ok) expect(ROW_ID_PATTERN.test(result.row.rowId) && !result.row.rowId.includes('/')).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('never lets a cell value outside the rules into a request (random cells)', () => {
    const cell = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.integer({ min: -10, max: 5000 }).map(String),
      fc.constantFrom('', ' ', '64', '256', '2048', '4294967295', '4'),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...COLUMNS), cell), (cells) => {
        const result = row(cells, 'dm');
        if (!result.ok) return;
        const r = result.row.request;
        expect(Object.keys(r).every((k) => (Object.values(Column) as string[]).includes(k))).toBe(true);
        expect(r.prompt.length).toBeGreaterThan(0);
        for (const d of [r.width, r.height])
          if (d !== undefined) expect(d % 64 === 0 && d >= 256 && d <= 2048).toBe(true);
        if (r.seed !== undefined) expect(Number.isInteger(r.seed) && r.seed >= 0 && r.seed < 2 ** 32).toBe(true);
        if (r.num_images !== undefined) expect([1, 2, 3, 4]).toContain(r.num_images);
      }),
      { numRuns: 1000 },
    );
  });
});
