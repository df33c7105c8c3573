import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fnv1a64Hex, idempotencyKeyFor, promptWorkflowId } from '../../src/workflows/keys';

describe('idempotency keys', () => {
  it('are the same for the same batch, row and attempt, and differ by attempt', () => {
    expect(idempotencyKeyFor('b', 'row-1', 1)).toBe('ib.b.row-1.a1');
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

  it('fnv1a64 matches the published test vectors', () => {
    expect(fnv1a64Hex('')).toBe('cbf29ce484222325');
    expect(fnv1a64Hex('a')).toBe('af63dc4c8601ec8c');
    expect(fnv1a64Hex('foobar')).toBe('85944171f73967e8');
  });

  it('row workflow ids are batch/row', () => {
    expect(promptWorkflowId('b1', 'row-7')).toBe('b1/row-7');
  });
});
