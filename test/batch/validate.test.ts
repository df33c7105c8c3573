import { afterAll, describe, expect, it } from 'vitest';
import {
  type BatchProblem,
  BatchFileError,
  BatchFileErrorReason,
  ProblemCode,
  validateBatchFile,
} from '../../src/batch';
import { ErrorCode } from '../../src/model/errors';
import { tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const HEADER = 'id,prompt,model,width,height,seed,num_images,negative_prompt';
const brief = (p: BatchProblem) => [p.code, p.line, p.field ?? null];

/** One file with every kind of malformation; line numbers are in the comments. */
const messy = Buffer.concat([
  Buffer.from(
    [
      HEADER, // 1
      'ok-1,a cat,flux,512,512,1,1,', // 2
      '', // 3 blank
      'ok-2,"a ""quoted"" dog, with comma",,1024,,,,', // 4 no model
      'bad-w,a fox,flux,1000,,,,', // 5 width not a multiple of 64
      'ragged,a,b', // 6
      ',   ,flux,,,,,', // 7 empty prompt, default id row-5
      'ok-1,dup,flux,,,,,', // 8 duplicate of line 2
      'bad id!,x,flux,,,,,', // 9
      'n1,x,flux,,,-1,5,', // 10 seed not a number, num_images > 4
      'h,x,flux,,2049,4294967296,0,', // 11 height (two rules), seed, num_images
      `big,${'p'.repeat(4001)},flux,,,,,${'n'.repeat(2001)}`, // 12 prompt and negative_prompt too long
      'q1,x"y,flux,,,,,', // 13 quote inside unquoted field
      '"multi', // 14 id with a line break
      'line",x,flux,,,,,', // 15
      'u1,',
    ].join('\n'),
  ),
  Buffer.from([0xff, 0xfe, 0x41]), // 16 bytes that are not UTF-8 in the prompt
  Buffer.from(
    [
      ',flux,,,,,', // 16 (end)
      'ok-3,fine,flux,,,,,', // 17
      'x,"unclosed,flux,,,,,', // 18 quote never closed
      'y,more,flux,,,,,', // 19
      '',
    ].join('\n'),
  ),
]);

describe('validateBatchFile on a file with every malformation', () => {
  it('reports every problem at once, with the line and field', async () => {
    const report = await validateBatchFile(tmp.file('messy.csv', messy), { defaultModel: 'dm' });
    expect(report.problems.map(brief)).toEqual([
      ['row.field_invalid', 5, 'width'],
      ['csv.ragged_row', 6, null],
      ['row.field_invalid', 7, 'prompt'],
      ['row.duplicate_id', 8, 'id'],
      ['row.id_invalid', 9, 'id'],
      ['row.field_invalid', 10, 'seed'],
      ['row.field_invalid', 10, 'num_images'],
      ['row.field_invalid', 11, 'height'],
      ['row.field_invalid', 11, 'height'],
      ['row.field_invalid', 11, 'seed'],
      ['row.field_invalid', 11, 'num_images'],
      ['row.field_invalid', 12, 'prompt'],
      ['row.field_invalid', 12, 'negative_prompt'],
      ['csv.invalid_quote', 13, null],
      ['row.id_invalid', 14, 'id'],
      ['encoding.invalid_utf8', 16, 'prompt'],
      ['csv.unclosed_quote', 18, null],
    ]);
    expect(report.ok).toBe(false);
    expect(report.complete).toBe(true);
    // Rows 2, 4, 17 are valid; the record of line 13 is malformed CSV and is not a row.
    expect(report.validRows).toBe(3);
    expect(report.rows).toBe(13);
    expect(report.invalidRows).toBe(10);
    expect(report.models).toEqual({ dm: { rows: 1, images: 1 }, flux: { rows: 2, images: 2 } });
    const dup = report.problems.find((p) => p.code === ProblemCode.DuplicateId);
    expect(dup).toMatchObject({ rowId: 'ok-1', firstLine: 2 });
    expect(dup?.message).toContain('line 2');
    const empty = report.problems.find((p) => p.line === 7);
    expect(empty).toMatchObject({ rowId: 'row-5', message: 'prompt is empty' });
    expect(report.problems.find((p) => p.field === 'width')?.message).toBe(
      'width must be a multiple of 64 (got "1000")',
    );
    expect(report.problems.find((p) => p.line === 18)?.message).toContain('to line 19');
  });

  it('without a default model, a row with no model is an error naming the field', async () => {
    const report = await validateBatchFile(tmp.file('messy2.csv', messy));
    const missing = report.problems.filter((p) => p.code === ProblemCode.ModelMissing);
    expect(missing.map(brief)).toEqual([['row.model_missing', 4, 'model']]);
    expect(missing[0]?.rowId).toBe('ok-2');
    expect(report.validRows).toBe(2);
  });
});

describe('validateBatchFile: encodings and line endings', () => {
  const body = 'prompt,model\na cat,flux\n"two\nlines",flux\nbad,flux,x\n';

  it('accepts a UTF-8 BOM silently: the first column is "prompt", lines unchanged', async () => {
    const report = await validateBatchFile(
      tmp.file('bom.csv', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)])),
    );
    expect(report.columns).toEqual(['prompt', 'model']);
    expect(report.problems.map(brief)).toEqual([['csv.ragged_row', 5, null]]);
    expect(report.validRows).toBe(2);
  });

  it('reports UTF-16 (both byte orders) as an unsupported encoding', async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(body, 'utf16le')]);
    const be = Buffer.from(le);
    be.swap16();
    for (const [name, content] of [
      ['le.csv', le],
      ['be.csv', be],
    ] as const) {
      const report = await validateBatchFile(tmp.file(name, content));
      expect(report.problems.map(brief)).toEqual([['file.unsupported_encoding', 1, null]]);
      expect(report.problems[0]?.message).toContain('UTF-16');
      expect(report.complete).toBe(false);
      expect(report.rows).toBe(0);
    }
  });

  it('hints at UTF-16 when the file has no BOM but NUL bytes in the header', async () => {
    const report = await validateBatchFile(tmp.file('nobom16.csv', Buffer.from(body, 'utf16le')));
    expect(report.problems[0]?.message).toContain('UTF-16');
  });

  it('reads CRLF files, and counts a CRLF inside a quoted field as one line', async () => {
    const crlf = body.replace(/\n/g, '\r\n');
    const report = await validateBatchFile(tmp.file('crlf.csv', crlf));
    expect(report.problems.map(brief)).toEqual([['csv.ragged_row', 5, null]]);
    expect(report.validRows).toBe(2);
  });

  it('reads lone-CR (old Mac) files and mixed line endings', async () => {
    const mixed = 'prompt,model\ra,flux\r\nb,flux\nc,flux,x\r';
    const report = await validateBatchFile(tmp.file('cr.csv', mixed));
    expect(report.problems.map(brief)).toEqual([['csv.ragged_row', 4, null]]);
    expect(report.validRows).toBe(2);
  });

  it('reports each line with bytes that are not UTF-8, including truncated and overlong sequences', async () => {
    const content = Buffer.concat([
      Buffer.from('prompt,model\nok é 日本 🎨,flux\n'), // 1, 2: valid multi-byte
      Buffer.from('a'),
      Buffer.from([0xc3]), // 3: truncated two-byte sequence
      Buffer.from(',flux\nb'),
      Buffer.from([0xc0, 0xaf]), // 4: overlong "/"
      Buffer.from(',flux\nc'),
      Buffer.from([0xed, 0xa0, 0x80]), // 5: UTF-16 surrogate
      Buffer.from(',flux\nfine,flux\n'),
    ]);
    const report = await validateBatchFile(tmp.file('utf8.csv', content));
    expect(report.problems.map(brief)).toEqual([
      ['encoding.invalid_utf8', 3, 'prompt'],
      ['encoding.invalid_utf8', 4, 'prompt'],
      ['encoding.invalid_utf8', 5, 'prompt'],
    ]);
    expect(report.validRows).toBe(2);
  });

  it('reports bad bytes in the header', async () => {
    const content = Buffer.concat([Buffer.from('prompt,mod'), Buffer.from([0xff]), Buffer.from('el\na,b\n')]);
    const report = await validateBatchFile(tmp.file('badheader.csv', content));
    expect(report.problems.map(brief)).toEqual([
      ['encoding.invalid_utf8', 1, null],
      ['header.unknown_column', 1, 'mod\uFFFDel'],
      ['row.model_missing', 2, 'model'],
    ]);
  });
});

describe('validateBatchFile: header', () => {
  it('reports a missing prompt column, unknown, empty and duplicate columns, once each', async () => {
    const report = await validateBatchFile(tmp.file('header.csv', 'Promt,model,colour,,model\na,b,c,d,e\nf,g,h,i,j\n'));
    expect(report.problems.map(brief)).toEqual([
      ['header.unknown_column', 1, 'Promt'],
      ['header.unknown_column', 1, 'colour'],
      ['header.empty_column', 1, null],
      ['header.duplicate_column', 1, 'model'],
      ['header.missing_prompt', 1, 'prompt'],
    ]);
    // A name of ours in another case (`Prompt`) is ours: see formats.test.ts.
    expect(report.rows).toBe(2);
    expect(report.validRows).toBe(0);
  });

  it('reports a header that is not valid CSV once, and no row problems after it', async () => {
    const unclosed = await validateBatchFile(tmp.file('h1.csv', '"prompt,model\na,m\n'));
    expect(unclosed.problems.map(brief)).toEqual([['csv.unclosed_quote', 1, null]]);
    const quote = await validateBatchFile(tmp.file('h2.csv', 'pro"mpt,model\na,m\n,\nb\n'));
    expect(quote.problems.map(brief)).toEqual([['csv.invalid_quote', 1, null]]);
    expect(quote.problems[0]?.message).toContain('header');
    expect([quote.rows, quote.invalidRows, quote.columns]).toEqual([2, 2, null]);
  });

  it('reports an empty file and a file with only a header', async () => {
    for (const content of ['', '\n\n\r\n']) {
      const report = await validateBatchFile(tmp.file('empty.csv', content));
      expect(report.problems.map(brief)).toEqual([['file.empty', 1, null]]);
    }
    const report = await validateBatchFile(tmp.file('onlyheader.csv', 'prompt\n\n'));
    expect(report.problems.map(brief)).toEqual([['file.no_rows', 2, null]]);
  });

  it('skips blank lines, also before the header and as ",,," rows, and counts them as lines', async () => {
    const report = await validateBatchFile(tmp.file('blank.csv', '\n\nprompt,model\n,\n\n  ,  \na,b\nc\n'));
    expect(report.columns).toEqual(['prompt', 'model']);
    expect(report.problems.map(brief)).toEqual([['csv.ragged_row', 8, null]]);
    expect(report.rows).toBe(2);
  });
});

describe('validateBatchFile: ids', () => {
  it('uses the id column when set, row-<n> otherwise, and reports both lines of a duplicate', async () => {
    const report = await validateBatchFile(
      tmp.file('ids.csv', 'id,prompt,model\nrow-2,a,m\n,b,m\nx.y:z_1-2,c,m\n' + 'a'.repeat(129) + ',d,m\n'),
    );
    expect(report.problems.map(brief)).toEqual([
      ['row.duplicate_id', 3, 'id'],
      ['row.id_invalid', 5, 'id'],
    ]);
    expect(report.problems[0]).toMatchObject({ rowId: 'row-2', firstLine: 2 });
  });

  it('refuses ids that are only dots (they would be charged, then fail as file names), with their lines', async () => {
    const report = await validateBatchFile(tmp.file('dots.csv', 'id,prompt,model\n.,a,m\n..,b,m\n...,c,m\n.a.b,d,m\n'));
    expect(report.problems.map(brief)).toEqual([
      ['row.id_invalid', 2, 'id'],
      ['row.id_invalid', 3, 'id'],
      ['row.id_invalid', 4, 'id'],
    ]);
    expect(report.problems[0]!.message).toMatch(/not only dots/);
    expect(report.validRows).toBe(1);
  });
});

describe('validateBatchFile: ids Windows cannot use as file names', () => {
  it('refuses reserved device names in any case, with or without an extension, and ids ending in a dot', async () => {
    const ids = ['CON', 'nul', 'Com1', 'lpt9.txt', 'aux.tar.gz', 'x.', 'ok', 'console', 'com0', 'a:b'];
    const report = await validateBatchFile(
      tmp.file('windows.csv', `id,prompt,model\n${ids.map((id) => `${id},p,m`).join('\n')}\n`),
    );
    expect(report.problems.map(brief)).toEqual([2, 3, 4, 5, 6, 7].map((line) => ['row.id_invalid', line, 'id']));
    expect(report.problems[0]!.message).toBe(
      'id "CON" must not be a name Windows reserves (CON, PRN, AUX, NUL, COM1-9, LPT1-9, with or without an extension) or end in a dot',
    );
    expect(report.validRows).toBe(4);
  });
});

describe('validateBatchFile: bounds', () => {
  it('keeps only the first maxProblems problems and counts the rest', async () => {
    const lines = ['prompt,model', ...Array.from({ length: 50 }, () => ',m')];
    const report = await validateBatchFile(tmp.file('many.csv', lines.join('\n')), { maxProblems: 10 });
    expect(report.problems).toHaveLength(10);
    expect(report.problemCount).toBe(50);
    expect(report.problemsDropped).toBe(40);
    expect(report.problems.map((p) => p.line)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('keeps the problem that stopped the read even past maxProblems, so an incomplete report says why', async () => {
    // Found by the fuzz test: 50 problems on the header filled the list, and the record too large on line 3 that
    // ended the read was dropped, leaving an incomplete report with no reason.
    const header = `prompt,model${','.repeat(50)}`;
    const lines = [header, 'a,m', `${'x'.repeat(3000)},m`, 'b,m'];
    const report = await validateBatchFile(tmp.file('stopped.csv', lines.join('\n')), {
      maxProblems: 10,
      maxRecordBytes: 2048,
    });
    expect(report.complete).toBe(false);
    expect(report.problems).toHaveLength(11);
    expect(report.problems.at(-1)).toMatchObject({ code: ProblemCode.RecordTooLarge, line: 3 });
  });

  it('stops at a record larger than maxRecordBytes (an unclosed quote in a big file), with its line', async () => {
    const lines = ['prompt,model', 'a,m', '"never closed,m', ...Array.from({ length: 2000 }, (_, i) => `row ${i},m`)];
    const report = await validateBatchFile(tmp.file('huge.csv', lines.join('\n')), { maxRecordBytes: 4096 });
    expect(report.problems.map(brief)).toEqual([['csv.record_too_large', 3, null]]);
    expect(report.complete).toBe(false);
    expect(report.validRows).toBe(1);
  });

  it('stops at a record with more than maxFields fields', async () => {
    const report = await validateBatchFile(tmp.file('commas.csv', `prompt,model\na,m\n${','.repeat(100_000)}\nb,m\n`));
    expect(report.problems.map(brief)).toEqual([['csv.too_many_fields', 3, null]]);
    expect(report.complete).toBe(false);
  });

  it('counts models and images of valid rows only, capped by maxModels', async () => {
    const report = await validateBatchFile(
      tmp.file('models.csv', 'prompt,model,num_images\na,m1,2\nb,m1,\nc,m2,4\nd,m3,1\ne,m1,9\n'),
      { maxModels: 2 },
    );
    expect(report.models).toEqual({ m1: { rows: 2, images: 3 }, m2: { rows: 1, images: 4 } });
    expect(report.otherModels).toEqual({ rows: 1, images: 1 });
  });

  it('throws BatchFileError for a file that cannot be read', async () => {
    await expect(validateBatchFile(`${tmp.dir}/missing.csv`)).rejects.toMatchObject({
      name: 'BatchFileError',
      code: ErrorCode.BatchFileUnreadable,
      reason: BatchFileErrorReason.Unreadable,
    });
    await expect(validateBatchFile(tmp.dir)).rejects.toBeInstanceOf(BatchFileError);
  });
});
