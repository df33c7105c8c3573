import { describe, expect, it } from 'vitest';
import { batchId } from '../../src/cli/options';

/** Issue 44, point 7: a batch or schedule id Windows cannot use as a file name is refused as an option value. */

describe('a batch or schedule id option', () => {
  it('refuses reserved device names and a final dot, saying why, and takes the rest (colons too)', () => {
    for (const id of ['CON', 'prn.log', 'LPT3', 'b1.']) {
      const parsed = batchId.safeParse(id);
      expect(parsed.success ? 'taken' : parsed.error.issues[0]?.message).toMatch(
        /^must not be a name Windows reserves/,
      );
    }
    expect(['b1', 'a:b', 'console'].map((id) => batchId.safeParse(id).success)).toEqual([true, true, true]);
  });
});
