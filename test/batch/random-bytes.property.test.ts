import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const CODES = new Set<string>(Object.values(ProblemCode));

/** Mostly CSV-shaped garbage: structural bytes, a plausible header now and then, and any byte at all. */
const garbage = fc
  .tuple(
    fc.constantFrom(
      '',
      'prompt,model\n',
      'id,prompt,model,width\r\n',
      '\ufeffprompt\n',
      'prompt,model,seed,num_images\n',
    ),
    fc.array(
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...[...Buffer.from(',"\n\r a1')]) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) },
        { weight: 1, arbitrary: fc.constantFrom(0xef, 0xbb, 0xbf, 0xff, 0xfe, 0xc3, 0xa9, 0xf0, 0x9f) },
      ),
      { maxLength: 300 },
    ),
  )
  .map(([head, rest]) => Buffer.concat([Buffer.from(head), Buffer.from(rest)]));

let counter = 0;

describe('random bytes (fast-check)', () => {
  it('give a report or rows, never an unexpected throw or a hang, and pages agree with one read', async () => {
    await fc.assert(
      fc.asyncProperty(
        garbage,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 120 }),
        async (buf, maxRows, maxBytes) => {
          const path = tmp.file(`g-${counter++}.csv`, buf);
          const limits = { maxRecordBytes: 128, maxFields: 16 };
          const report = await validateBatchFile(path, { ...limits, defaultModel: 'm' });
          for (const p of report.problems) {
            expect(CODES.has(p.code)).toBe(true);
            expect(Number.isInteger(p.line) && p.line >= 1).toBe(true);
            expect(p.message.length).toBeGreaterThan(0);
          }
          expect(report.validRows + report.invalidRows).toBe(report.rows);
          expect(report.ok).toBe(report.problemCount === 0);

          const single = await readBatchPage(path, undefined, { ...limits, defaultModel: 'm', maxRows: 100_000 });
          const paged = await readAllPages(path, { ...limits, defaultModel: 'm', maxRows, maxBytes }, 1000);
          // Duplicate ids are checked per page, so only files without duplicates must agree row for row.
          if (!report.problems.some((p) => p.code === ProblemCode.DuplicateId)) {
            expect(paged.rows).toEqual(single.rows);
            const headerOk = !report.problems.some((p) => p.code.startsWith('header.') || p.line === 1);
            if (headerOk && report.problemsDropped === 0) expect(single.rows.length).toBe(report.validRows);
          }
          for (const row of paged.rows) expect(row.request.prompt.trim()).toBe(row.request.prompt);
        },
      ),
      { numRuns: 1500 },
    );
  });
});
