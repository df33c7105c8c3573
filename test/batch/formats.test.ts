import { afterAll, describe, expect, it } from 'vitest';
import { ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { sniffDelimiter } from '../../src/batch/format';
import { readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** Rows as a widely used public prompt set writes them: tab-separated, a capitalised header, four columns. */
const PROMPT_SET = [
  'Prompt\tCategory\tChallenge\tNote',
  'A red fox, sitting in the snow\tAnimals\tBasic\t',
  'A sign that says "Deep Learning"\tArts\tWriting & Symbols\tquotes, commas',
  'an astronaut riding a horse\tPeople\tImagination\tthe classic one',
  'a bowl of soup; steaming\tFood & Beverage\tBasic\t',
  'The Eiffel Tower at night\tWorld Knowledge\tFine-grained Detail\tlandmark',
  'two cats and one dog\tAnimals\tQuantity\t',
  'a painting of a lighthouse\tArts\tStyle & Format\tlast row',
];

describe('tab-separated files', () => {
  it('validate with a BOM and a capitalised header, the other columns carried', async () => {
    const file = tmp.file(
      'parti.tsv',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(PROMPT_SET.join('\r\n') + '\r\n')]),
    );
    const report = await validateBatchFile(file, { defaultModel: 'sdxl', carryOthers: true });
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ ok: true, format: 'tab', rows: 7, validRows: 7, headerLine: 1 });
    expect(report.carried).toEqual(['Category', 'Challenge', 'Note']);
    expect(report.columns).toEqual(['Prompt', 'Category', 'Challenge', 'Note']);
  });

  it('read page by page, every row once, with its carried cells and the format in the cursor', async () => {
    const file = tmp.file(
      'pages.tsv',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(PROMPT_SET.join('\n') + '\n')]),
    );
    const userColumns = { carry: ['Category', 'Challenge', 'Note'] };
    const { rows, pages } = await readAllPages(file, { defaultModel: 'sdxl', userColumns, maxRows: 2 });
    expect(pages.length).toBeGreaterThanOrEqual(4);
    expect(pages[0]!.nextCursor.format).toBe('tab');
    expect(rows.map((r) => [r.rowId, r.line, r.request.prompt])).toEqual(
      PROMPT_SET.slice(1).map((l, i) => [`row-${i + 1}`, i + 2, l.split('\t')[0]]),
    );
    expect(rows[1]!.columns).toEqual({ Category: 'Arts', Challenge: 'Writing & Symbols', Note: 'quotes, commas' });
    expect(rows[0]!.columns).toEqual({ Category: 'Animals', Challenge: 'Basic', Note: '' });
  });

  it('give every carried column back under its own header name when results read them (readAll)', async () => {
    const file = tmp.file('results.tsv', PROMPT_SET.join('\n') + '\n');
    const { rows } = await readAllPages(file, { defaultModel: 'sdxl', userColumns: { readAll: true }, maxRows: 3 });
    expect(rows).toHaveLength(7);
    expect(rows[2]!.columns).toEqual({ Category: 'People', Challenge: 'Imagination', Note: 'the classic one' });
  });

  it('read quotes as text, except around a whole cell', async () => {
    const file = tmp.file('quotes.tsv', 'prompt\tnote\n"Hello" she said\tx\nsay "hi" now\ty\n"a\ttab"\tz\n');
    const { rows } = await readAllPages(file, { defaultModel: 'm', userColumns: { carry: ['note'] } });
    expect(rows.map((r) => r.request.prompt)).toEqual(['"Hello" she said', 'say "hi" now', 'a\ttab']);
  });

  it('are sniffed in a .csv file too', async () => {
    const file = tmp.file('tabs.csv', PROMPT_SET.slice(0, 3).join('\n') + '\n');
    const report = await validateBatchFile(file, { defaultModel: 'sdxl', carryOthers: true });
    expect(report).toMatchObject({ ok: true, format: 'tab', validRows: 2 });
  });
});

describe('semicolon-separated files', () => {
  it('are sniffed and read, quotes as in CSV', async () => {
    const file = tmp.file('excel-de.csv', 'id;prompt;model\na;"ein Fuchs; rot";sdxl\nb;eine Katze, grau;sdxl\n');
    const report = await validateBatchFile(file);
    expect(report).toMatchObject({ ok: true, format: 'semicolon', validRows: 2 });
    const { rows, pages } = await readAllPages(file, { maxRows: 1 });
    expect(pages[0]!.nextCursor.format).toBe('semicolon');
    expect(rows.map((r) => r.request.prompt)).toEqual(['ein Fuchs; rot', 'eine Katze, grau']);
  });
});

describe('the delimiter sniffer', () => {
  it('keeps comma for comma CSV whose cells hold semicolons and tabs, and for a header of one column', () => {
    expect(sniffDelimiter('prompt,model\na; b; c,m\nd\te,m\n')).toBe('comma');
    expect(sniffDelimiter('prompt\na; b\n')).toBe('comma');
    expect(sniffDelimiter('')).toBe('comma');
  });
  it('respects quotes and takes the consistent delimiter', () => {
    expect(sniffDelimiter('prompt;model\n"a, b, c";m\n"d,e";m\n')).toBe('semicolon');
    expect(sniffDelimiter('a\tb\tc\nx\ty\tz\n')).toBe('tab');
    // Comma wins a tie.
    expect(sniffDelimiter('a,b;c\nx,y;z\n')).toBe('comma');
  });
  it('splits the header when no delimiter is consistent (the rows are then ragged, not the header unknown)', () => {
    expect(sniffDelimiter('prompt\tmodel\tnote\nonly one\n')).toBe('tab');
  });
});

describe('header names', () => {
  it('match our columns regardless of case and surrounding spaces', async () => {
    const file = tmp.file('case.csv', ' PROMPT ,Negative_Prompt,Model,Width\na fox,blurry,sdxl,512\n');
    const page = await readBatchPage(file, undefined);
    expect(page.problems).toEqual([]);
    expect(page.rows[0]!.request).toEqual({ prompt: 'a fox', negative_prompt: 'blurry', model: 'sdxl', width: 512 });
    const second = await readBatchPage(tmp.file('case2.csv', 'Prompt,MODEL\na,m\nb,m\n'), undefined, { maxRows: 1 });
    const next = await readBatchPage(tmp.dir + '/case2.csv', second.nextCursor, { maxRows: 1 });
    expect(next.rows.map((r) => r.request)).toEqual([{ prompt: 'b', model: 'm' }]);
  });

  it('that stand for the same column are a duplicate naming both', async () => {
    const file = tmp.file('dup.csv', 'Prompt,model,prompt \na,m,b\n');
    const report = await validateBatchFile(file);
    expect(report.problems.map((p) => [p.code, p.line, p.field, p.message])).toEqual([
      [
        ProblemCode.HeaderDuplicateColumn,
        1,
        'prompt',
        'header columns "Prompt" (column 1) and "prompt" (column 3) are both the column prompt',
      ],
    ]);
  });

  it('carried by default are bounded: more than 32 is one problem', async () => {
    const names = Array.from({ length: 33 }, (_, i) => `c${i}`);
    const file = tmp.file('wide.csv', `prompt,model,${names.join(',')}\na,m,${names.map(() => 'x').join(',')}\n`);
    const report = await validateBatchFile(file, { carryOthers: true });
    expect(report.problems.map((p) => p.code)).toEqual([ProblemCode.HeaderTooManyColumns]);
    expect(report.problems[0]!.message).toContain('the header has 33 columns of your own');
    const fewer = tmp.file(
      'fewer.csv',
      `prompt,model,${names.slice(1).join(',')}\na,m,${names
        .slice(1)
        .map(() => 'x')
        .join(',')}\n`,
    );
    expect((await validateBatchFile(fewer, { carryOthers: true })).ok).toBe(true);
  });

  it('outside ours are still refused without carryOthers (the library default)', async () => {
    const file = tmp.file('unknown.tsv', PROMPT_SET.slice(0, 2).join('\n'));
    const report = await validateBatchFile(file, { defaultModel: 'sdxl' });
    expect(report.problems.map((p) => [p.code, p.field])).toEqual([
      [ProblemCode.HeaderUnknownColumn, 'Category'],
      [ProblemCode.HeaderUnknownColumn, 'Challenge'],
      [ProblemCode.HeaderUnknownColumn, 'Note'],
    ]);
  });
});

describe('a cursor written before formats', () => {
  it('reads comma CSV', async () => {
    const file = tmp.file('old.csv', 'prompt,model\na,m\nb,m\n');
    const first = await readBatchPage(file, undefined, { maxRows: 1 });
    expect(first.nextCursor.format).toBeUndefined();
    const next = await readBatchPage(file, { ...first.nextCursor }, { maxRows: 1 });
    expect(next.rows.map((r) => r.request.prompt)).toEqual(['b']);
  });
});

describe('files that are not text', () => {
  it('are one problem when they hold NUL bytes', async () => {
    const png = Buffer.concat([
      Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'),
      Buffer.alloc(64),
      Buffer.from('IHDR\n,,\n'),
    ]);
    const file = tmp.file('image.csv', png);
    const report = await validateBatchFile(file);
    expect(report.problems.map((p) => [p.code, p.line])).toEqual([[ProblemCode.NotText, 1]]);
    expect(report.problems[0]!.message).toBe(
      'the file is not text (it holds NUL bytes: an image, a spreadsheet (.xlsx) or a UTF-16 file?); save it as CSV (UTF-8)',
    );
    expect(report.complete).toBe(false);
    const page = await readBatchPage(file, undefined);
    expect(page.problems.map((p) => p.code)).toEqual([ProblemCode.NotText]);
    expect(page.done).toBe(true);
  });

  it('say an Excel workbook is one', async () => {
    const xlsx = Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), Buffer.from('[Content_Types].xml\nprompt\n')]);
    const report = await validateBatchFile(tmp.file('book.csv', xlsx));
    expect(report.problems.map((p) => [p.code, p.message])).toEqual([
      [ProblemCode.NotText, 'the file is an Excel workbook or another zip archive, not text: save it as CSV UTF-8'],
    ]);
  });

  it('are one problem when most bytes are neither UTF-8 nor printable (no NUL)', async () => {
    const noise = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37 + 1) % 255 || 1));
    const report = await validateBatchFile(tmp.file('noise.csv', noise));
    expect(report.problems.map((p) => p.code)).toEqual([ProblemCode.NotText]);
  });

  it('leave a Latin-1 file with a few bad bytes to the per-line encoding problem', async () => {
    const report = await validateBatchFile(tmp.file('latin1.csv', Buffer.from('prompt,model\ncaf\xe9,m\n', 'latin1')));
    expect(report.problems.map((p) => [p.code, p.line])).toEqual([[ProblemCode.InvalidUtf8, 2]]);
  });
});
