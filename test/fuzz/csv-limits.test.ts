import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { afterAll, describe, expect, it } from 'vitest';
import { type BatchReport, ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { tempDir } from '../batch/helpers';

/**
 * Files built to exhaust memory or time: a 50 MB field, sixteen million blank lines, a hundred thousand columns,
 * every byte-order mark, NUL bytes, unbalanced quotes. Each gets a problem naming its line, or correct rows, and
 * memory that does not grow with the hostile part.
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());
const MB = 1024 * 1024;

/** Writes `head`, then `part` `times` times, then `tail`, streaming (the test process never holds the file). */
async function bigFile(name: string, head: string, part: string | Buffer, times: number, tail: string) {
  const path = `${tmp.dir}/${name}`;
  const out = createWriteStream(path);
  out.write(head);
  const block = Buffer.concat(Array<Buffer>(Math.min(times, 4096)).fill(Buffer.from(part)));
  const perBlock = Math.min(times, 4096);
  for (let left = times; left > 0; left -= perBlock) {
    const chunk = left >= perBlock ? block : block.subarray(0, left * Buffer.byteLength(part));
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end(tail);
  await once(out, 'finish');
  return path;
}

/**
 * Growth of the JS heap plus ArrayBuffers while `run` runs, sampled every 2 ms (no `global.gc` here, so garbage
 * not yet collected counts too: bounds are generous, and far below what keeping the hostile part would take).
 */
async function growthMb<T>(run: () => Promise<T>): Promise<{ value: T; mb: number }> {
  const used = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const baseline = used();
  let peak = baseline;
  const timer = setInterval(() => (peak = Math.max(peak, used())), 2);
  try {
    const value = await run();
    return { value, mb: (Math.max(peak, used()) - baseline) / MB };
  } finally {
    clearInterval(timer);
  }
}

const codes = (r: BatchReport) => r.problems.map((p) => [p.code, p.line]);

describe('hostile sizes', () => {
  it('a 50 MB field stops the read at its line without buffering it, quoted or not', async () => {
    const plain = await bigFile('field.csv', 'prompt\nfine\n', 'a', 50 * MB, '\nnext\n');
    const quoted = await bigFile('quoted.csv', 'prompt\nfine\n"', 'a\n', 25 * MB, '"\nnext\n');
    for (const path of [plain, quoted]) {
      const { value: report, mb } = await growthMb(() => validateBatchFile(path, { defaultModel: 'm' }));
      expect(codes(report)).toEqual([[ProblemCode.RecordTooLarge, 3]]);
      expect(report.problems[0]?.message).toContain('line 3');
      expect(report.complete).toBe(false);
      expect(report.validRows).toBe(1);
      expect(mb).toBeLessThan(32);
      const page = await readBatchPage(path, undefined, { defaultModel: 'm' });
      expect(page.rows.map((r) => r.request.prompt)).toEqual(['fine']);
      expect(page.problems.map((p) => [p.code, p.line])).toEqual([[ProblemCode.RecordTooLarge, 3]]);
      expect(page.done).toBe(true);
    }
  });

  it('sixteen million blank lines (LF, CRLF, lone CR) keep no line each, and the row after has its line', async () => {
    const blanks = 8 * MB + 4 * MB + 4 * MB;
    const path = `${tmp.dir}/blank.csv`;
    const out = createWriteStream(path);
    out.write('prompt\n');
    for (const [part, times] of [
      ['\n', 8 * MB],
      ['\r\n', 4 * MB],
      ['\r', 4 * MB],
    ] as const) {
      const block = Buffer.from(part.repeat(64 * 1024));
      for (let left = times; left > 0; left -= 64 * 1024) if (!out.write(block)) await once(out, 'drain');
    }
    out.end('x\n');
    await once(out, 'finish');

    const { value: report, mb } = await growthMb(() => validateBatchFile(path, { defaultModel: 'm' }));
    expect(codes(report)).toEqual([]);
    expect([report.rows, report.validRows]).toEqual([1, 1]);
    // Before LineIndex.forgetBefore, every blank line kept its start offset until the next record: gigabytes.
    expect(mb).toBeLessThan(64);
    const page = await readBatchPage(path, undefined, { defaultModel: 'm' });
    expect(page.rows).toEqual([{ rowId: 'row-1', line: 2 + blanks, request: { prompt: 'x', model: 'm' } }]);
  });

  it('a hundred thousand columns stop the read at their line; a thousand are each reported, within the cap', async () => {
    const wide = await bigFile('wide.csv', 'prompt\nfine\n', 'x,', 100_000, 'x\nnext\n');
    const report = await validateBatchFile(wide, { defaultModel: 'm' });
    expect(codes(report)).toEqual([[ProblemCode.TooManyFields, 3]]);
    expect(report.complete).toBe(false);

    const header = Array.from({ length: 1000 }, (_, i) => `c${i}`).join(',');
    const many = await bigFile('many.csv', `prompt,${header}\n`, 'p,', 1000, 'p\n');
    const r = await validateBatchFile(many, { defaultModel: 'm', maxFields: 2000, maxProblems: 100 });
    expect(r.problems).toHaveLength(100);
    expect(r.problemCount).toBe(1000);
    expect(r.problemsDropped).toBe(900);
    expect(r.problems.every((p) => p.code === ProblemCode.HeaderUnknownColumn && p.line === 1 && p.field)).toBe(true);
  });
});

describe('byte-order marks, NUL bytes, line ends and quotes', () => {
  const cases: [string, Buffer | string, [string, number][], string[]][] = [
    ['UTF-8 BOM', '\ufeffprompt\nhello\n', [], ['hello']],
    ['two UTF-8 BOMs', '\ufeff\ufeffprompt\nhello\n', [], ['hello']],
    ['a BOM starting a later line', 'prompt\n\ufeffhello\n', [], ['hello']],
    [
      'UTF-16 LE with BOM',
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('prompt\nhi\n', 'utf16le')]),
      [[ProblemCode.UnsupportedEncoding, 1]],
      [],
    ],
    [
      'UTF-16 BE with BOM',
      Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('prompt\nhi\n', 'utf16le').swap16()]),
      [[ProblemCode.UnsupportedEncoding, 1]],
      [],
    ],
    ['UTF-32 LE with BOM', Buffer.from([0xff, 0xfe, 0, 0, 0x70, 0, 0, 0]), [[ProblemCode.UnsupportedEncoding, 1]], []],
    ['UTF-32 BE with BOM', Buffer.from([0, 0, 0xfe, 0xff, 0, 0, 0, 0x70]), [[ProblemCode.UnsupportedEncoding, 1]], []],
    ['UTF-16 LE without BOM', Buffer.from('prompt\nhi\n', 'utf16le'), [[ProblemCode.NotText, 1]], []],
    ['NUL inside a prompt', 'prompt\na\u0000b\n', [], ['a\u0000b']],
    ['NUL bytes alone on a line', 'prompt\n\u0000\u0000\nok\n', [], ['\u0000\u0000', 'ok']],
    ['lone CR line ends', 'prompt\rone\r\rtwo\r', [], ['one', 'two']],
    ['CR, LF and CRLF mixed', 'prompt\r\none\rtwo\nthree\r\n', [], ['one', 'two', 'three']],
    ['a quote never closed', 'prompt\nok\n"open\nmore\n', [[ProblemCode.UnclosedQuote, 3]], ['ok']],
    ['a quote inside a bare field', 'prompt\nok\nab"c\nfine\n', [[ProblemCode.InvalidQuote, 3]], ['ok', 'fine']],
    // csv-parse cannot tell where such a field ends: it reads on as if the quote were still open.
    [
      'text after a closing quote',
      'prompt\nok\n"ab"c\nfine\n',
      [
        [ProblemCode.InvalidQuote, 3],
        [ProblemCode.UnclosedQuote, 3],
      ],
      ['ok'],
    ],
    ['only quotes', '"""""""', [[ProblemCode.UnclosedQuote, 1]], []],
  ];

  it.each(cases)('%s', async (name, content, expected, prompts) => {
    const path = tmp.file(`${name.replace(/\W+/g, '-')}.csv`, content);
    const report = await validateBatchFile(path, { defaultModel: 'm' });
    const got = codes(report).filter(([code]) => code !== ProblemCode.FileNoRows);
    expect(got).toEqual(expected);
    for (const p of report.problems) expect(p.message.length).toBeGreaterThan(0);
    const page = await readBatchPage(path, undefined, { defaultModel: 'm' });
    expect(page.rows.map((r) => r.request.prompt)).toEqual(prompts);
  });
});
