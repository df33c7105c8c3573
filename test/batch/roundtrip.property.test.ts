import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { readBatchPage, validateBatchFile } from '../../src/batch';
import { csvLine, readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** Text with everything CSV makes hard: quotes, commas, every line break, spaces, multi-byte characters. */
const text = fc
  .array(
    fc.oneof(
      fc.constantFrom('"', ',', '\n', '\r\n', '\r', ' ', '""', 'é', '日本', '🎨', '\u2028', '\t', 'a', 'Z'),
      // No lone surrogates: they cannot be written as UTF-8.
      fc.string({ unit: 'binary', maxLength: 4 }).filter((s) => !/[\uD800-\uDFFF]/u.test(s)),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(''));

const row = fc.record({
  prompt: text.filter((s) => s.trim() !== ''),
  negative: text,
  model: fc.constantFrom('flux-dev', 'sdxl', ''),
  width: fc.option(fc.integer({ min: 4, max: 32 }).map((n) => n * 64)),
  seed: fc.option(fc.nat({ max: 2 ** 32 - 1 })),
});

const file = fc.record({
  rows: fc.array(row, { minLength: 0, maxLength: 25 }),
  lineBreak: fc.constantFrom('\n', '\r\n'),
  bom: fc.boolean(),
  quoteAll: fc.boolean(),
  withIds: fc.boolean(),
  trailingBreak: fc.boolean(),
  blankLines: fc.array(fc.nat({ max: 30 }), { maxLength: 3 }),
  maxRows: fc.integer({ min: 1, max: 30 }),
  maxBytes: fc.integer({ min: 1, max: 2000 }),
});

/** Physical line at a character position: LF, CRLF and lone CR each end one line. */
function lineAt(text: string, position: number): number {
  let line = 1;
  for (let i = 0; i < position; i++) {
    const c = text[i];
    if (c === '\n' || (c === '\r' && text[i + 1] !== '\n')) line += 1;
  }
  return line;
}

let counter = 0;

describe('round trip through readBatchPage (fast-check)', () => {
  it('every row written with correct CSV quoting comes back once, in order, with its line, at any page size', async () => {
    await fc.assert(
      fc.asyncProperty(file, async (f) => {
        const header = ['prompt', 'model', 'negative_prompt', 'width', 'seed', ...(f.withIds ? ['id'] : [])];
        const records = f.rows.map((r, i) => [
          r.prompt,
          r.model,
          r.negative,
          r.width === null ? '' : String(r.width),
          r.seed === null ? '' : String(r.seed),
          ...(f.withIds ? [`id.${i}`] : []),
        ]);
        let content = f.bom ? '\ufeff' : '';
        content += csvLine(header, f.quoteAll) + f.lineBreak;
        const starts: number[] = [];
        records.forEach((cells, i) => {
          if (f.blankLines.includes(i)) content += f.lineBreak;
          starts.push(content.length);
          content += csvLine(cells, f.quoteAll) + (i < records.length - 1 || f.trailingBreak ? f.lineBreak : '');
        });
        const path = tmp.file(`rt-${counter++}.csv`, content);
        const bomShift = f.bom ? 1 : 0;
        const expected = f.rows.map((r, i) => ({
          rowId: f.withIds ? `id.${i}` : `row-${i + 1}`,
          line: lineAt(content.slice(bomShift), starts[i]! - bomShift),
          request: {
            prompt: r.prompt.trim(),
            model: r.model === '' ? 'default-model' : r.model,
            ...(r.negative.trim() === '' ? {} : { negative_prompt: r.negative.trim() }),
            ...(r.width === null ? {} : { width: r.width }),
            ...(r.seed === null ? {} : { seed: r.seed }),
          },
        }));

        const options = { defaultModel: 'default-model', maxRows: f.maxRows, maxBytes: f.maxBytes };
        const { rows, pages } = await readAllPages(path, options);
        expect(rows).toEqual(expected);
        for (const page of pages) {
          expect(page.problems).toEqual([]);
          expect(page.rows.length).toBeLessThanOrEqual(f.maxRows);
        }
        const single = await readBatchPage(path, undefined, { defaultModel: 'default-model', maxRows: 1000 });
        expect(single.rows).toEqual(expected);

        const report = await validateBatchFile(path, { defaultModel: 'default-model' });
        expect(report.problems).toEqual(f.rows.length === 0 ? [expect.objectContaining({ code: 'file.no_rows' })] : []);
        expect([report.rows, report.validRows]).toEqual([f.rows.length, f.rows.length]);
      }),
      { numRuns: 600 },
    );
  });
});
