import { createWriteStream, statSync } from 'node:fs';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchCursor } from '../../src/model';
import { readBatchPage, validateBatchFile } from '../../src/batch';
import { tempDir } from './helpers';

const ROWS = 200_000;
const DUPLICATE = 12_345;
const tmp = tempDir();
let path = '';

/** Row i (1-based): every third prompt spans two lines, so row i starts on a line we can compute. */
function rowText(i: number): string {
  const prompt = `A lighthouse number ${i}, "at dusk", café 日本 🎨 ${'with gulls and waves '.repeat(5)}`;
  const cell = i % 3 === 0 ? `"${prompt.replace(/"/g, '""')}\nsecond line"` : `"${prompt.replace(/"/g, '""')}"`;
  return `item-${i},${cell},flux-dev,${256 + (i % 8) * 64},${i}\n`;
}

/** Line of row i: header is line 1, rows with i % 3 === 0 take two lines. */
const lineOf = (i: number) => 2 + (i - 1) + Math.floor((i - 1) / 3);

beforeAll(async () => {
  path = `${tmp.dir}/large.csv`;
  const out = createWriteStream(path);
  out.write('id,prompt,model,width,seed\n');
  for (let i = 1; i <= ROWS; i++) if (!out.write(rowText(i))) await once(out, 'drain');
  // One duplicate id, far from the first use: the id table keeps digests only and must still find it.
  out.write(rowText(DUPLICATE));
  out.end();
  await once(out, 'finish');
});
afterAll(() => tmp.cleanup());

describe(`a ${ROWS.toLocaleString('en')}-row file`, () => {
  it('is validated in bounded memory', async () => {
    const size = statSync(path).size;
    expect(size).toBeGreaterThan(35 * 2 ** 20);
    // No `global.gc` here, so growth is sampled while the validator runs: the JS heap plus ArrayBuffers (the id
    // table and stream buffers live there). Garbage that the GC has not collected yet counts too, which is why
    // the bound is generous: 64 MB. Keeping the rows, or the file, would need far more than that (the file alone
    // is over 35 MB as bytes and twice that as JS strings).
    const used = () => {
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const baseline = used();
    let peak = baseline;
    const timer = setInterval(() => (peak = Math.max(peak, used())), 2);
    let report;
    try {
      report = await validateBatchFile(path);
    } finally {
      clearInterval(timer);
    }
    peak = Math.max(peak, used());
    expect(report.problems.map((p) => [p.code, p.line, p.firstLine])).toEqual([
      ['row.duplicate_id', lineOf(ROWS + 1), lineOf(DUPLICATE)],
    ]);
    expect([report.rows, report.validRows]).toEqual([ROWS + 1, ROWS]);
    expect(report.models).toEqual({ 'flux-dev': { rows: ROWS, images: ROWS } });
    expect((peak - baseline) / 2 ** 20).toBeLessThan(64);
  });

  it('reads every row exactly once, in order, page after page', async () => {
    // Pages check duplicate ids within a page only, so the late duplicate comes back as a row here.
    const expectedId = (n: number) => `item-${n <= ROWS ? n : DUPLICATE}`;
    let cursor: BatchCursor | undefined;
    let next = 1;
    let pages = 0;
    const wrong: string[] = [];
    for (;;) {
      const page = await readBatchPage(path, cursor, { maxRows: 1000 });
      pages += 1;
      expect(page.problems).toEqual([]);
      for (const row of page.rows) {
        // Plain comparisons: 400,000 `expect` calls would cost more than the reading.
        if (row.rowId !== expectedId(next) || row.line !== lineOf(next)) wrong.push(`${row.rowId}@${row.line}`);
        next += 1;
      }
      if (page.done) break;
      cursor = page.nextCursor;
    }
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(next - 1).toBe(ROWS + 1);
    expect(pages).toBeGreaterThanOrEqual(ROWS / 1000);
  });
});
