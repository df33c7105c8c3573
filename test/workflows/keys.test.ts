import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  fnv1a64Hex,
  idempotencyKeyFor,
  legacyIdempotencyKeyFor,
  parseIdempotencyKey,
  promptWorkflowId,
} from '../../src/model';

const id = fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/);

describe('idempotency keys', () => {
  it('are the same for the same batch, row and attempt, and differ by attempt', () => {
    expect(idempotencyKeyFor('b', 'row-1', 1)).toBe('ib/b/row-1/a1');
    expect(idempotencyKeyFor('b', 'row-1', 1)).toBe(idempotencyKeyFor('b', 'row-1', 1));
    expect(idempotencyKeyFor('b', 'row-1', 2)).not.toBe(idempotencyKeyFor('b', 'row-1', 1));
  });

  it('stay within 255 printable ASCII characters and unique for long ids', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
        fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
        fc.integer({ min: 1, max: 99 }),
        (batch, row, attempt) => {
          const key = idempotencyKeyFor(batch, row, attempt);
          expect(key.length).toBeLessThanOrEqual(255);
          expect(key).toMatch(/^[\x21-\x7e]+$/);
          expect(key).not.toBe(idempotencyKeyFor(batch, row, attempt + 1));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('are one-to-one: no two rows share a key (the old form gave a.b,c and a,b.c one key)', () => {
    expect(legacyIdempotencyKeyFor('a.b', 'c', 1)).toBe(legacyIdempotencyKeyFor('a', 'b.c', 1));
    expect(idempotencyKeyFor('a.b', 'c', 1)).not.toBe(idempotencyKeyFor('a', 'b.c', 1));
    fc.assert(
      fc.property(
        fc.tuple(id, id, fc.integer({ min: 1, max: 999 })),
        fc.tuple(id, id, fc.integer({ min: 1, max: 999 })),
        ([b1, r1, a1], [b2, r2, a2]) => {
          const key = idempotencyKeyFor(b1, r1, a1);
          if (key.startsWith(`ib/${b1}/`))
            expect(parseIdempotencyKey(key)).toEqual({ batchId: b1, rowId: r1, attempt: a1 });
          else expect(parseIdempotencyKey(key)).toMatchObject({ rowId: r1, attempt: a1 });
          fc.pre(b1 !== b2 || r1 !== r2 || a1 !== a2);
          expect(idempotencyKeyFor(b1, r1, a1)).not.toBe(idempotencyKeyFor(b2, r2, a2));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('are one-to-one within a batch, whatever the lengths: rows that differ only around a separator', () => {
    fc.assert(
      fc.property(id, id, id, fc.integer({ min: 1, max: 9 }), (batch, left, right, attempt) => {
        // Pairs built to collide in a joined form: (batch + "." + left, right) against (batch, left + "." + right).
        const a = idempotencyKeyFor(`${batch}.${left}`.slice(0, 128), right, attempt);
        const b = idempotencyKeyFor(batch, `${left}.${right}`.slice(0, 128), attempt);
        const same = `${batch}.${left}`.slice(0, 128) === batch && right === `${left}.${right}`.slice(0, 128);
        if (!same) expect(a).not.toBe(b);
        // Same batch, two rows: never the same key, even when both ids are as long as they may be.
        const long = batch.padEnd(128, 'x');
        expect(idempotencyKeyFor(long, left.padEnd(128, 'y'), attempt)).not.toBe(
          idempotencyKeyFor(long, right.padEnd(128, 'z'), attempt),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it('fnv1a64 matches the published test vectors', () => {
    expect(fnv1a64Hex('')).toBe('cbf29ce484222325');
    expect(fnv1a64Hex('a')).toBe('af63dc4c8601ec8c');
    expect(fnv1a64Hex('foobar')).toBe('85944171f73967e8');
  });

  it('row workflow ids are batch/row', () => {
    expect(promptWorkflowId('b1', 'row-7')).toBe('b1/row-7');
  });

  it('row workflow ids fit 255 characters (a SQL store refuses more), keep the start of the batch id and the whole row id', () => {
    const batch = 'b'.repeat(128);
    const row = 'r'.repeat(128);
    const id = promptWorkflowId(batch, row);
    expect(id).toHaveLength(255);
    expect(id).toMatch(/^b{109}~[0-9a-f]{16}\/r{128}$/);
    expect(promptWorkflowId('b'.repeat(127), row)).toMatch(/^b{109}~[0-9a-f]{16}\/r{128}$/); // 256: cut
    expect(promptWorkflowId('b'.repeat(126), row)).toBe(`${'b'.repeat(126)}/${row}`); // 255: whole
  });

  it('row workflow ids are one-to-one over every batch and row id', () => {
    fc.assert(
      fc.property(fc.tuple(id, id), fc.tuple(id, id), ([b1, r1], [b2, r2]) => {
        fc.pre(b1 !== b2 || r1 !== r2);
        const [x, y] = [promptWorkflowId(b1, r1), promptWorkflowId(b2, r2)];
        expect(x.length).toBeLessThanOrEqual(255);
        expect(x).not.toBe(y);
      }),
      { numRuns: 2_000 },
    );
  });
});
