import { isUtf8 } from 'node:buffer';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineIndex } from '../../src/batch/line-index';

/** Feeds `chunks` through a LineIndex that starts at `offset`/`line` and waits for the end. */
async function run(chunks: Buffer[], offset = 0, line = 1): Promise<LineIndex> {
  const index = new LineIndex(offset, line);
  const sink = new Writable({ write: (_chunk, _enc, cb) => cb() });
  await pipeline(Readable.from(chunks, { objectMode: false }), index, sink);
  return index;
}

/** Reference: the physical lines (LF, CRLF, lone CR) as [start, end) byte ranges. */
function referenceLines(buf: Buffer): Array<[number, number]> {
  const lines: Array<[number, number]> = [];
  let start = 0;
  for (let i = 0; i < buf.length; i++) {
    if (buf[i] === 0x0a || (buf[i] === 0x0d && buf[i + 1] !== 0x0a)) {
      lines.push([start, i + 1]);
      start = i + 1;
    }
  }
  lines.push([start, buf.length]);
  return lines;
}

function splitAt(buf: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const p of [...points, buf.length]) {
    if (p > from) chunks.push(buf.subarray(from, p));
    from = Math.max(from, p);
  }
  return chunks;
}

const bytes = fc
  .array(
    fc.oneof(
      fc.integer({ min: 0, max: 255 }),
      fc.constantFrom(0x0a, 0x0d, 0x2c, 0x22, 0x41),
      fc.constantFrom(...[...Buffer.from('é日🎨')]),
    ),
    { maxLength: 200 },
  )
  .map((a) => Buffer.from(a));

describe('LineIndex', () => {
  it('finds exactly the lines holding bytes that are not UTF-8, however the bytes are chunked', async () => {
    await fc.assert(
      fc.asyncProperty(bytes, fc.array(fc.nat(), { maxLength: 6 }), async (buf, cuts) => {
        const index = await run(splitAt(buf, cuts));
        const expected = referenceLines(buf)
          .map(([s, e], i) => (isUtf8(buf.subarray(s, e)) ? 0 : i + 1))
          .filter((l) => l > 0);
        expect(index.takeInvalidLines()).toEqual(expected);
      }),
      { numRuns: 1500 },
    );
  });

  it('gives the physical line of any byte, counting CRLF once and lone CR as a break', async () => {
    await fc.assert(
      fc.asyncProperty(
        bytes,
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        async (buf, cuts, queries) => {
          const index = await run(splitAt(buf, cuts), 1000, 10);
          const lines = referenceLines(buf);
          const offsets = queries.map((q) => q % Math.max(buf.length, 1)).sort((a, b) => a - b);
          for (const o of offsets) {
            if (o >= buf.length) continue;
            const expected = lines.findIndex(([s, e]) => o >= s && o < e) + 10;
            expect(index.lineOf(1000 + o)).toBe(expected);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('skips blank lines when asked where a record starting at a boundary begins', async () => {
    const index = await run([Buffer.from('a\n\n\r\n\rb\nc')]);
    expect(index.recordLineFrom(2)).toBe(5);
    expect(index.lineOf(8)).toBe(6);
    expect(index.lastLine).toBe(6);
  });
});

describe('LineIndex, a query that compacts the forgotten lines', () => {
  it('still answers the line of its offset (found by the hostile-CSV fuzzer: a row after 4,096 blank lines)', async () => {
    const blank = 5_000;
    const buf = Buffer.concat([Buffer.from('prompt\n'), Buffer.alloc(blank, 0x0a), Buffer.from('x\n')]);
    const index = await run([buf]);
    // One query far ahead makes the index forget (compact) the lines behind it within the same call.
    expect(index.lineOf(buf.length - 2)).toBe(blank + 2);
  });
});
