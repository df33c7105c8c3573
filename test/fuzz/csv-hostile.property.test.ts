import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type BatchProblem, type BatchRow, ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { csvLine, readAllPages, tempDir } from '../batch/helpers';
import { runs } from './runs';

/**
 * The CSV reader and validator on hostile files. Well-formed CSV carrying wrong values in every column is checked
 * against an independent reading of the rules (contract-defaults.md, "The submit body"): every bad cell is reported
 * with its line and field, every good row comes back exactly. Token soup with long runs, odd line ends, NUL bytes and
 * byte-order marks must give well-formed problems or rows, never a throw, within a bound per case.
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());
let counter = 0;

/** Per case: a generous bound that only a hang or a runaway loop would reach. */
const CASE_TIMEOUT_MS = 20_000;

const COLUMNS = ['id', 'prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;
type Col = (typeof COLUMNS)[number];
const CODES = new Set<string>(Object.values(ProblemCode));
/** Codes about one cell or one header column: they must name it. */
const FIELD_CODES = new Set<string>([
  ProblemCode.FieldInvalid,
  ProblemCode.IdInvalid,
  ProblemCode.ModelMissing,
  ProblemCode.DuplicateId,
  ProblemCode.HeaderUnknownColumn,
  ProblemCode.HeaderDuplicateColumn,
  ProblemCode.HeaderMissingPrompt,
]);

const longText = (codePoints: number, tail = '') => 'p'.repeat(codePoints - [...tail].length) + tail;
const text = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom(
    '',
    '   ',
    '\t',
    '\ufeff',
    '\u2028',
    'a "quoted" word, with commas',
    'line\nbreak',
    'cr\ronly',
    'crlf\r\nend',
    'nul\u0000byte',
    '🎨 日本 é',
    ' padded ',
    longText(4000),
    longText(4000, '🎨'),
    longText(4001),
    longText(2000),
    longText(2001),
  ),
);
const model = fc.constantFrom(
  '',
  ' ',
  'flux-dev',
  ' sdxl ',
  'モデル',
  'ctrl\u0001char',
  'x'.repeat(256),
  'x'.repeat(257),
);
const number = fc.oneof(
  fc.integer({ min: -100, max: 5000 }).map(String),
  fc.integer({ min: 0, max: 40 }).map((n) => String(n * 64)),
  fc.constantFrom('', ' 512 ', '512.0', '1e3', '-64', '+64', '0x100', 'abc', '٥١٢', '0512', '9'.repeat(16)),
  fc.constantFrom('4294967295', '4294967296', '0', '1', '4', '5', '2048', '2112', '256', '192'),
);
const id = fc.oneof(
  fc.constantFrom('', 'a', 'b', 'row-1', 'row-2', 'A.b_c:d-9', 'x'.repeat(128)),
  fc.constantFrom('a/b', 'x'.repeat(129), 'é', ' ', 'a b', 'tab\there'),
);
const CELL: Record<Col, fc.Arbitrary<string>> = {
  id,
  prompt: text,
  model,
  negative_prompt: text,
  width: number,
  height: number,
  seed: number,
  num_images: number,
};

/** A header made of known columns, sometimes spoilt: renamed, duplicated, empty, unknown, NUL inside. */
const header = fc
  .tuple(
    fc.shuffledSubarray([...COLUMNS], { minLength: 1 }),
    fc.constantFrom('none', 'none', 'none', 'padded', 'renamed', 'duplicate', 'empty', 'unknown', 'nul'),
  )
  .map(([cols, spoil]) => {
    const names: string[] = [...cols];
    switch (spoil) {
      case 'none':
        break;
      case 'padded':
        names[0] = ` ${names[0]} `;
        break;
      case 'renamed':
        names[0] = names[0] === 'prompt' ? 'Prompt' : `${names[0]!.replace('_', '-')}s`;
        break;
      case 'duplicate':
        names.push(cols[0]!);
        break;
      case 'empty':
        names.push('');
        break;
      case 'unknown':
        names.push('style');
        break;
      case 'nul':
        names.push('p\u0000r\u0000');
        break;
    }
    return names;
  });

const file = header.chain((names) =>
  fc.record({
    names: fc.constant(names),
    rows: fc.array(
      fc.oneof(
        { weight: 6, arbitrary: fc.tuple(...names.map((n) => CELL[n.trim() as Col] ?? text)) },
        { weight: 1, arbitrary: fc.constant(names.map(() => '')) },
      ),
      { maxLength: 12 },
    ),
    blankBefore: fc.array(fc.nat({ max: 12 }), { maxLength: 3 }),
    lineBreak: fc.constantFrom('\n', '\r\n', '\r'),
    quoteAll: fc.boolean(),
    bom: fc.boolean(),
    trailingBreak: fc.boolean(),
    defaultModel: fc.constantFrom(undefined, 'flux-dev'),
  }),
);

/** Physical line breaks: LF, CRLF and a lone CR each end one line. */
function breaks(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\n' || (s[i] === '\r' && s[i + 1] !== '\n')) n += 1;
  }
  return n;
}

const codePoints = (s: string) => [...s].length;
const WHOLE = /^[0-9]{1,15}$/;
const inRange = (v: string, min: number, max: number, step = 1) =>
  WHOLE.test(v) && Number(v) >= min && Number(v) <= max && Number(v) % step === 0;

interface Expected {
  line: number;
  rowId: string | undefined;
  /** Fields the rules refuse; empty for a valid row. */
  bad: Set<string>;
  request: BatchRow['request'];
}

/** The rules, read independently of src/batch: what each row must give. */
function judge(
  names: readonly string[],
  cells: readonly string[],
  rowNumber: number,
  line: number,
  defaultModel: string | undefined,
  seen: Map<string, number>,
): Expected {
  const trimmed = names.map((n) =>
    n
      .trim()
      .toLowerCase()
      .replace(/[\s-]+/g, '_'),
  );
  const get = (c: Col) => {
    const i = trimmed.indexOf(c);
    return i < 0 ? undefined : cells[i]!.trim();
  };
  const bad = new Set<string>();
  const idCell = get('id');
  let rowId: string | undefined = `row-${rowNumber}`;
  if (idCell !== undefined && idCell !== '') {
    rowId = /^[A-Za-z0-9._:-]{1,128}$/.test(idCell) ? idCell : undefined;
    if (rowId === undefined) bad.add('id');
  }
  const prompt = get('prompt') ?? '';
  if (prompt === '' || codePoints(prompt) > 4000) bad.add('prompt');
  let m = get('model');
  if (m === undefined || m === '') {
    if (defaultModel === undefined) bad.add('model');
    m = defaultModel ?? '';
    // eslint-disable-next-line no-control-regex
  } else if (m.length > 256 || /[\u0000-\u001f\u007f]/.test(m)) bad.add('model');
  const request: BatchRow['request'] = { prompt, model: m };
  const negative = get('negative_prompt');
  if (negative !== undefined && negative !== '') {
    if (codePoints(negative) > 2000) bad.add('negative_prompt');
    request.negative_prompt = negative;
  }
  const numeric: [Col & keyof BatchRow['request'], number, number, number][] = [
    ['width', 256, 2048, 64],
    ['height', 256, 2048, 64],
    ['seed', 0, 2 ** 32 - 1, 1],
    ['num_images', 1, 4, 1],
  ];
  for (const [col, min, max, step] of numeric) {
    const v = get(col);
    if (v === undefined || v === '') continue;
    if (inRange(v, min, max, step)) (request as unknown as Record<string, number>)[col] = Number(v);
    else bad.add(col);
  }
  if (rowId !== undefined) {
    if (seen.has(rowId)) bad.add('id');
    else seen.set(rowId, line);
  }
  return { line, rowId, bad, request };
}

function expectWellFormed(problems: readonly BatchProblem[], lastLine: number): void {
  for (const p of problems) {
    expect(CODES.has(p.code), p.code).toBe(true);
    // "No data rows" names line 2, where they should start, even when the header has no line break after it.
    const max = p.code === ProblemCode.FileNoRows ? Math.max(2, lastLine) : lastLine;
    expect(Number.isInteger(p.line) && p.line >= 1 && p.line <= max, `line ${p.line} of ${lastLine}`).toBe(true);
    expect(p.message.length).toBeGreaterThan(0);
    if (FIELD_CODES.has(p.code)) expect(typeof p.field === 'string' && p.field !== '', p.message).toBe(true);
  }
}

describe('hostile values in well-formed CSV (fast-check)', () => {
  it('every bad cell is reported with its line and field; every good row comes back exactly', async () => {
    await fc.assert(
      fc.asyncProperty(file, async (f) => {
        let content = f.bom ? '\ufeff' : '';
        content += csvLine(f.names, f.quoteAll) + f.lineBreak;
        const placed: { cells: string[]; line: number }[] = [];
        f.rows.forEach((cells, i) => {
          if (f.blankBefore.includes(i)) content += f.lineBreak;
          placed.push({ cells, line: breaks(content) + 1 });
          content += csvLine(cells, f.quoteAll) + (i < f.rows.length - 1 || f.trailingBreak ? f.lineBreak : '');
        });
        const path = tmp.file(`h-${counter++}.csv`, content);
        const report = await validateBatchFile(path, { defaultModel: f.defaultModel });
        const lastLine = breaks(content) + 1;
        expectWellFormed(report.problems, lastLine);

        // Header names are ours in any case, around spaces and with spaces or hyphens for `_`.
        const trimmed = f.names.map((n) =>
          n
            .trim()
            .toLowerCase()
            .replace(/[\s-]+/g, '_'),
        );
        const headerBad =
          !trimmed.includes('prompt') ||
          trimmed.some((n, i) => !(COLUMNS as readonly string[]).includes(n) || trimmed.indexOf(n) !== i);
        const headerProblems = report.problems.filter((p) => p.code.startsWith('header.'));
        expect(headerProblems.length > 0).toBe(headerBad);
        for (const p of headerProblems) expect(p.line).toBe(1);
        if (headerBad) {
          const page = await readBatchPage(path, undefined, { defaultModel: f.defaultModel });
          expect(page.rows).toEqual([]);
          expect(page.done).toBe(true);
          expect(report.ok).toBe(false);
          return;
        }

        const seen = new Map<string, number>();
        const data = placed.filter((r) => r.cells.some((c) => c.trim() !== ''));
        const expected = data.map((r, i) => judge(f.names, r.cells, i + 1, r.line, f.defaultModel, seen));
        expect(report.rows).toBe(data.length);
        expect(report.validRows).toBe(expected.filter((e) => e.bad.size === 0).length);
        for (const e of expected) {
          const at = report.problems.filter((p) => p.line === e.line);
          const fields = new Set(at.map((p) => p.field));
          if (e.bad.size === 0) expect(at, `line ${e.line}`).toEqual([]);
          for (const field of e.bad) expect(fields.has(field), `line ${e.line} field ${field}`).toBe(true);
        }
        expect(report.ok).toBe(data.length > 0 && expected.every((e) => e.bad.size === 0));

        const page = await readBatchPage(path, undefined, { defaultModel: f.defaultModel, maxRows: 1000 });
        const good = expected.filter((e) => e.bad.size === 0);
        expect(page.rows).toEqual(good.map((e) => ({ rowId: e.rowId, line: e.line, request: e.request })));
      }),
      { numRuns: runs(600), timeout: CASE_TIMEOUT_MS },
    );
  });
});

/** Bytes that make CSV hard, some repeated thousands of times: runs reach the record and field limits. */
const token = fc.oneof(
  fc.constantFrom('"', ',', '\n', '\r', '\r\n', '""', ' ', 'a', 'prompt', '\u0000', '\ufeff', 'é', '🎨'),
  fc.constantFrom(Buffer.from([0xff]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xef, 0xbb])),
);
const soup = fc
  .tuple(
    fc.constantFrom('', 'prompt\n', 'prompt,model\r\n', '\ufeffprompt\r', 'id,prompt,model,width\n', 'prompt,\n'),
    fc.array(fc.tuple(token, fc.oneof({ weight: 5, arbitrary: fc.constant(1) }, fc.integer({ min: 2, max: 3000 }))), {
      maxLength: 40,
    }),
  )
  .map(([head, parts]) =>
    Buffer.concat([
      Buffer.from(head),
      ...parts.map(([t, n]) => {
        const b = typeof t === 'string' ? Buffer.from(t) : t;
        return Buffer.concat(Array<Buffer>(n).fill(b));
      }),
    ]),
  );

function physicalLines(buf: Buffer): number {
  let n = 1;
  for (let i = 0; i < buf.length; i++) if (buf[i] === 0x0a || (buf[i] === 0x0d && buf[i + 1] !== 0x0a)) n += 1;
  return n;
}

describe('token soup with long runs (fast-check)', () => {
  it('gives well-formed problems or rows within the limits, never a throw, and pages agree with one read', async () => {
    await fc.assert(
      fc.asyncProperty(soup, fc.integer({ min: 1, max: 50 }), async (buf, maxRows) => {
        const path = tmp.file(`s-${counter++}.csv`, buf);
        const limits = { maxRecordBytes: 2048, maxFields: 32, defaultModel: 'm' };
        const report = await validateBatchFile(path, limits);
        const lines = physicalLines(buf);
        expectWellFormed(report.problems, lines);
        expect(report.validRows + report.invalidRows).toBe(report.rows);
        const fatal = report.problems.filter(
          (p) => p.code === ProblemCode.RecordTooLarge || p.code === ProblemCode.TooManyFields,
        );
        const unread = report.problems.some((p) => p.code.startsWith('file.un') || p.code === ProblemCode.NotText);
        expect(report.complete).toBe(fatal.length === 0 && !unread);
        expect(fatal.length).toBeLessThanOrEqual(1);

        const single = await readBatchPage(path, undefined, { ...limits, maxRows: 100_000 });
        const paged = await readAllPages(path, { ...limits, maxRows, maxBytes: 4096 }, 10_000);
        if (!report.problems.some((p) => p.code === ProblemCode.DuplicateId)) expect(paged.rows).toEqual(single.rows);
        for (const row of paged.rows) {
          expect(row.line >= 2 && row.line <= lines).toBe(true);
          expect(row.request.prompt.trim()).toBe(row.request.prompt);
          expect(row.request.prompt.length).toBeGreaterThan(0);
        }
        for (const page of paged.pages) expectWellFormed(page.problems, lines);
      }),
      { numRuns: runs(300), timeout: CASE_TIMEOUT_MS },
    );
  });

  it('stops at the first record over the size limit or the field limit, naming its line', async () => {
    const shape = fc.record({
      before: fc.nat({ max: 5 }),
      size: fc.integer({ min: 1, max: 3000 }),
      fields: fc.integer({ min: 1, max: 80 }),
      quoted: fc.boolean(),
      lineBreak: fc.constantFrom('\n', '\r\n', '\r'),
    });
    await fc.assert(
      fc.asyncProperty(shape, async (s) => {
        const lb = s.lineBreak;
        const big = s.quoted ? `"${'x\n'.repeat(Math.max(1, s.size >> 1))}"` : 'x'.repeat(s.size);
        const row = [big, ...Array<string>(s.fields - 1).fill('')].join(',');
        const content = `prompt${lb}${'ok'.concat(lb).repeat(s.before)}${row}${lb}after${lb}`;
        const path = tmp.file(`l-${counter++}.csv`, content);
        const report = await validateBatchFile(path, { maxRecordBytes: 1024, maxFields: 64, defaultModel: 'm' });
        const line = 2 + s.before;
        // csv-parse counts the characters of the fields (not delimiters or quotes) and refuses the record once
        // they pass the limit by more than the character in hand: 1025 still fits, 1026 does not.
        const chars = big.length - (s.quoted ? 2 : 0);
        const fatal = report.problems.find(
          (p) => p.code === ProblemCode.RecordTooLarge || p.code === ProblemCode.TooManyFields,
        );
        if (chars > 1025) {
          expect(fatal).toMatchObject({ code: ProblemCode.RecordTooLarge, line });
          expect(fatal?.message).toContain(`line ${line}`);
          expect(report.complete).toBe(false);
          expect(report.problems.every((p) => p.line <= line)).toBe(true);
        } else if (chars <= 1024) {
          expect(fatal).toBeUndefined();
          expect(report.complete).toBe(true);
          // Fields beyond the header's one: a ragged row at that line (a record this small is parsed in one
          // chunk, so the field guard, which bounds records still in progress, does not need to stop it).
          const ragged = report.problems.find((p) => p.code === ProblemCode.RaggedRow);
          expect(ragged?.line).toBe(s.fields > 1 ? line : undefined);
        }
      }),
      { numRuns: runs(300), timeout: CASE_TIMEOUT_MS },
    );
  });
});
