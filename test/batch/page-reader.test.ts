import { openSync, readSync, closeSync, utimesSync, appendFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { BatchCursor } from '../../src/model';
import { BatchFileErrorReason, readBatchPage } from '../../src/batch';
import { csvLine, readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** The bytes of the file from `offset` for `length` bytes. */
function bytesAt(path: string, offset: number, length: number): string {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(length);
    const n = readSync(fd, buf, 0, length, offset);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

const prompts = [
  'a cat',
  'line one\nline two', // quoted LF
  'crlf one\r\ncrlf two\r\n', // quoted CRLF, ending in one
  'comma, and "quotes"',
  'unicode 日本語 🎨 é',
  '🎨'.repeat(100), // multi-byte, long
  '  padded  ',
  '"',
];

function sampleFile(name: string, lineBreak: string, bom = false): string {
  const lines = [
    'id,prompt,model,num_images',
    ...prompts.map((p, i) => csvLine([`r${i}`, p, 'flux', String((i % 4) + 1)])),
  ];
  const text = lines.join(lineBreak) + lineBreak;
  return tmp.file(name, bom ? `\ufeff${text}` : text);
}

describe('readBatchPage', () => {
  for (const [label, lineBreak, bom] of [
    ['LF', '\n', false],
    ['CRLF', '\r\n', false],
    ['CRLF with BOM', '\r\n', true],
  ] as const) {
    it(`${label}: pages of every size give every row once, in order, with the right lines`, async () => {
      const path = sampleFile(`sample-${label}.csv`, lineBreak, bom);
      const whole = await readBatchPage(path, undefined, { maxRows: 1000 });
      expect(whole.done).toBe(true);
      expect(whole.problems).toEqual([]);
      expect(whole.rows.map((r) => r.request.prompt)).toEqual(prompts.map((p) => p.trim()));
      // Lines: header 1, then 2, 3 (2 lines), 5 (3 lines: it ends in a line break), 8, ...
      expect(whole.rows.map((r) => r.line)).toEqual([2, 3, 5, 8, 9, 10, 11, 12]);
      expect(whole.rows.map((r) => r.request.num_images)).toEqual([1, 2, 3, 4, 1, 2, 3, 4]);
      for (let maxRows = 1; maxRows <= prompts.length; maxRows++) {
        const { rows, pages } = await readAllPages(path, { maxRows });
        expect(rows).toEqual(whole.rows);
        expect(pages.length).toBe(Math.ceil(prompts.length / maxRows));
      }
      for (const maxBytes of [1, 10, 50, 200, 1000]) {
        const { rows } = await readAllPages(path, { maxBytes, maxRows: 1000 });
        expect(rows).toEqual(whole.rows);
      }
    });
  }

  it('starts every later page exactly at a record boundary, never inside a quoted line break', async () => {
    const path = sampleFile('boundaries.csv', '\r\n');
    let cursor: BatchCursor | undefined;
    const starts: string[] = [];
    for (;;) {
      const page = await readBatchPage(path, cursor, { maxRows: 1 });
      if (page.done) break;
      cursor = page.nextCursor;
      starts.push(bytesAt(path, cursor.byteOffset, 3));
    }
    expect(starts).toEqual(['r1,', 'r2,', 'r3,', 'r4,', 'r5,', 'r6,', 'r7,']);
  });

  it('resuming from a cursor equals the matching part of a full read (ids, lines, row-<n> numbering)', async () => {
    const lines = ['prompt,model', ...Array.from({ length: 30 }, (_, i) => csvLine([`p${i}\n${'x'.repeat(i)}`, 'm']))];
    const path = tmp.file('resume.csv', lines.join('\n'));
    const whole = await readBatchPage(path, undefined, { maxRows: 100 });
    expect(whole.rows.map((r) => r.rowId)).toEqual(Array.from({ length: 30 }, (_, i) => `row-${i + 1}`));
    const first = await readBatchPage(path, undefined, { maxRows: 7 });
    const cursor = JSON.parse(JSON.stringify(first.nextCursor)) as BatchCursor; // as through workflow history
    expect(cursor).toMatchObject({ line: 16, rowsBefore: 7, header: ['prompt', 'model'] });
    const rest = await readBatchPage(path, cursor, { maxRows: 100 });
    expect([...first.rows, ...rest.rows]).toEqual(whole.rows);
    expect(rest.done).toBe(true);
  });

  it('stops at the page boundary of a long file, with the exact next offset', async () => {
    const lines = ['prompt,model', ...Array.from({ length: 100_000 }, (_, i) => `prompt ${i},m`)];
    const path = tmp.file('long.csv', lines.join('\n'));
    const page = await readBatchPage(path, undefined, { maxRows: 3 });
    expect(page.rows.map((r) => r.request.prompt)).toEqual(['prompt 0', 'prompt 1', 'prompt 2']);
    expect(page.done).toBe(false);
    expect(page.nextCursor.byteOffset).toBe(Buffer.byteLength(lines.slice(0, 4).join('\n') + '\n'));
  });

  it('returns invalid rows as problems with their row ids, and counts them', async () => {
    const path = tmp.file(
      'invalid.csv',
      'id,prompt,model,width\na,ok,m,512\nb,,m,\nc,ok,m,4096\nd,ok,m,\nd,again,m,\n',
    );
    const page = await readBatchPage(path, undefined, { maxRows: 100 });
    expect(page.rows.map((r) => r.rowId)).toEqual(['a', 'd']);
    expect(page.invalidRows).toBe(3);
    expect(page.problems.map((p) => [p.code, p.line, p.rowId])).toEqual([
      ['row.field_invalid', 3, 'b'],
      ['row.field_invalid', 4, 'c'],
      ['row.duplicate_id', 6, 'd'],
    ]);
  });

  it('applies the default model, and never puts unknown columns into a request', async () => {
    const path = tmp.file('default.csv', 'prompt,model,seed\na,,7\nb,own,\n');
    const page = await readBatchPage(path, undefined, { defaultModel: 'dm' });
    expect(page.rows.map((r) => r.request)).toEqual([
      { prompt: 'a', model: 'dm', seed: 7 },
      { prompt: 'b', model: 'own' },
    ]);
    const unknown = await readBatchPage(tmp.file('unknown.csv', 'prompt,model,style\na,m,x\n'), undefined);
    expect(unknown.rows).toEqual([]);
    expect(unknown.done).toBe(true);
    expect(unknown.problems.map((p) => p.code)).toEqual(['header.unknown_column']);
  });

  it('reports an empty file, a UTF-16 file, and bad CSV within a page', async () => {
    const empty = await readBatchPage(tmp.file('e.csv', ''), undefined);
    expect([empty.done, empty.problems.map((p) => p.code)]).toEqual([true, ['file.empty']]);
    const utf16 = await readBatchPage(tmp.file('u.csv', Buffer.from('\ufeffprompt\na\n', 'utf16le')), undefined);
    expect([utf16.done, utf16.problems.map((p) => p.code)]).toEqual([true, ['file.unsupported_encoding']]);
    const bad = await readBatchPage(tmp.file('b.csv', 'prompt,model\na,m\nb"x,m\nc,m\n"d,m\n'), undefined);
    expect(bad.rows.map((r) => r.request.prompt)).toEqual(['a', 'c']);
    expect(bad.problems.map((p) => [p.code, p.line])).toEqual([
      ['csv.invalid_quote', 3],
      ['csv.unclosed_quote', 5],
    ]);
    expect(bad.done).toBe(true);
    const badHeader = await readBatchPage(tmp.file('h.csv', 'pro"mpt,model\na,m\nb,m\n'), undefined);
    expect([badHeader.done, badHeader.rows, badHeader.problems.map((p) => [p.code, p.line])]).toEqual([
      true,
      [],
      [['csv.invalid_quote', 1]],
    ]);
  });

  it('refuses to go on with a file that changed since the first page', async () => {
    const path = tmp.file('changing.csv', 'prompt,model\na,m\nb,m\n');
    const first = await readBatchPage(path, undefined, { maxRows: 1 });
    appendFileSync(path, 'c,m\n');
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    await expect(readBatchPage(path, first.nextCursor)).rejects.toMatchObject({ reason: BatchFileErrorReason.Changed });
  });
});
