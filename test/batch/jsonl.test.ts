import { afterAll, describe, expect, it } from 'vitest';
import { ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const GOOD = [
  '{"id": "a", "Prompt": "a red fox", "model": "sdxl", "width": 1024, "seed": 7, "tag": "x", "flag": true}',
  '',
  '{"id":"b","prompt":"a blue bird","model":"sdxl","width":null,"tag":"y\\ttab","flag":false}',
  '   ',
  '{"id":"c","prompt":"a \\"quoted\\" cat","model":"sdxl"}',
  '{"id":"d","prompt":"a dog","model":"sdxl","TAG":"z"}',
].join('\r\n');

describe('JSON Lines files', () => {
  it('are read by extension: keys are columns, values cells as written, others carried', async () => {
    const file = tmp.file('good.jsonl', GOOD + '\n');
    const report = await validateBatchFile(file, { carryOthers: true });
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ ok: true, format: 'jsonl', rows: 4, validRows: 4, headerLine: 1 });
    expect(report.columns).toEqual(['id', 'Prompt', 'model', 'width', 'seed', 'tag', 'flag']);
    expect(report.carried).toEqual(['tag', 'flag']);
    const { rows, pages } = await readAllPages(file, { userColumns: { carry: ['tag', 'flag'] }, maxRows: 1 });
    expect(pages[0]!.nextCursor.format).toBe('jsonl');
    expect(rows.map((r) => [r.rowId, r.line, r.request, r.columns])).toEqual([
      ['a', 1, { prompt: 'a red fox', model: 'sdxl', width: 1024, seed: 7 }, { tag: 'x', flag: 'true' }],
      ['b', 3, { prompt: 'a blue bird', model: 'sdxl' }, { tag: 'y\ttab', flag: 'false' }],
      ['c', 5, { prompt: 'a "quoted" cat', model: 'sdxl' }, { tag: '', flag: '' }],
      ['d', 6, { prompt: 'a dog', model: 'sdxl' }, { tag: 'z', flag: '' }],
    ]);
  });

  it('are sniffed from a first byte `{`, whatever the name', async () => {
    const file = tmp.file('prompts.txt', '\n{"prompt":"a","model":"m"}\n{"prompt":"b","model":"m"}');
    const report = await validateBatchFile(file);
    expect(report).toMatchObject({ ok: true, format: 'jsonl', rows: 2, headerLine: 2 });
    const { rows } = await readAllPages(file, { maxRows: 1 });
    expect(rows.map((r) => [r.line, r.request.prompt])).toEqual([
      [2, 'a'],
      [3, 'b'],
    ]);
  });

  it('report each bad line with its line and key, the other rows valid', async () => {
    const file = tmp.file(
      'bad.jsonl',
      [
        '{"id":"a","prompt":"fine","model":"m"}',
        '{"id":"b","prompt":"more","model":"m","colour":"red"}',
        '{"id":"c","prompt":{"text":"nested"},"model":"m"}',
        '["not", "an", "object"]',
        '{"id":"e","prompt":"cut',
        '{"id":"f","prompt":"","model":"m"}',
        '{"id":"g","prompt":"last","model":"m"}',
      ].join('\n'),
    );
    const report = await validateBatchFile(file);
    expect(report.problems.map((p) => [p.code, p.line, p.field])).toEqual([
      [ProblemCode.JsonUnknownKey, 2, 'colour'],
      [ProblemCode.JsonNestedValue, 3, 'prompt'],
      [ProblemCode.JsonInvalid, 4, undefined],
      [ProblemCode.JsonInvalid, 5, undefined],
      [ProblemCode.FieldInvalid, 6, 'prompt'],
    ]);
    expect(report.problems[0]!.message).toBe(
      'line 2: the key "colour" is not one of the columns, the keys of the first object ("id", "prompt", "model")',
    );
    expect(report.problems[2]!.message).toBe('line 4 is not a JSON object ({"prompt": "..."})');
    expect(report.problems[3]!.message).toMatch(/^line 5 is not valid JSON \(/);
    expect(report).toMatchObject({ rows: 7, validRows: 2, invalidRows: 5 });
    const { rows, pages } = await readAllPages(file, { maxRows: 2 });
    expect(rows.map((r) => r.rowId)).toEqual(['a', 'g']);
    expect(pages.reduce((n, p) => n + p.invalidRows, 0)).toBe(5);
  });

  it('without an object on the first line have no columns: one problem, no row read', async () => {
    const file = tmp.file('nohead.jsonl', 'prompt,model\n{"prompt":"a","model":"m"}\n');
    const report = await validateBatchFile(file);
    expect(report.problems.map((p) => [p.code, p.line])).toEqual([[ProblemCode.JsonInvalid, 1]]);
    expect(report.problems[0]!.message).toMatch(/so the file has no columns$/);
    const page = await readBatchPage(file, undefined);
    expect(page).toMatchObject({ rows: [], done: true });
  });

  it('find bytes that are not UTF-8, and bound the line size', async () => {
    const bad = Buffer.concat([
      Buffer.from('{"prompt":"ok","model":"m"}\n{"prompt":"caf'),
      Buffer.from([0xe9]),
      Buffer.from('","model":"m"}\n'),
    ]);
    const report = await validateBatchFile(tmp.file('latin.jsonl', bad));
    expect(report.problems.map((p) => [p.code, p.line, p.field])).toEqual([[ProblemCode.InvalidUtf8, 2, 'prompt']]);
    const big = `{"prompt":"ok","model":"m"}\n{"prompt":"${'x'.repeat(5000)}","model":"m"}\n{"prompt":"after","model":"m"}\n`;
    const large = await validateBatchFile(tmp.file('large.jsonl', big), { maxRecordBytes: 1024 });
    expect(large.problems.map((p) => [p.code, p.line])).toEqual([[ProblemCode.RecordTooLarge, 2]]);
    expect(large.complete).toBe(false);
  });

  it('resume from a cursor at any row boundary, lone CR line breaks too', async () => {
    const lines = Array.from({ length: 9 }, (_, i) => `{"id":"r${i}","prompt":"p ${i}","model":"m"}`);
    const file = tmp.file('cr.jsonl', lines.join('\r') + '\r');
    for (const maxRows of [1, 2, 4, 100]) {
      const { rows } = await readAllPages(file, { maxRows });
      expect(rows.map((r) => [r.rowId, r.line])).toEqual(lines.map((_, i) => [`r${i}`, i + 1]));
    }
  });
});
