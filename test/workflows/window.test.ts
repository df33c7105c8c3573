import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LIMIT_MEMORY_MS, WINDOW_DEFAULTS, type BindingLimit } from '../../src/model';
import { AdaptiveWindow } from '../../src/workflows/window';

/** The batch's window as a plain class (#32): additive increase, multiplicative decrease, a floor and a ceiling. */

const room = (w: AdaptiveWindow, rows: number, atMs: number) => {
  for (let i = 0; i < rows; i++) w.rowEnded(undefined, atMs);
};

describe('the adaptive window', () => {
  it('starts at 8 with a ceiling of 256 by default, or at the ceiling a person sets', () => {
    expect(new AdaptiveWindow(AdaptiveWindow.start()).size).toBe(WINDOW_DEFAULTS.initial);
    expect(AdaptiveWindow.start()).toMatchObject({ ceiling: 256, floor: 1 });
    expect(new AdaptiveWindow(AdaptiveWindow.start({ initial: 4, ceiling: 4 })).size).toBe(4);
    expect(new AdaptiveWindow(AdaptiveWindow.start({ initial: 40, ceiling: 16 })).size).toBe(16);
  });

  it('grows by one a row while no limit binds (slow start), up to its ceiling and no further', () => {
    const w = new AdaptiveWindow(AdaptiveWindow.start({ ceiling: 20 }));
    room(w, 5, 0);
    expect(w.size).toBe(13);
    room(w, 100, 0);
    expect(w.size).toBe(20);
    expect(w.view(0)).toEqual({ size: 20, ceiling: 20, boundBy: 'ceiling' });
  });

  it('a quota signal cuts it to 0.7 of itself; reports within the limit memory are the same event', () => {
    const w = new AdaptiveWindow(AdaptiveWindow.start());
    room(w, 32, 0); // 8 + 32
    expect(w.size).toBe(40);
    w.rowEnded('concurrency', 1_000);
    expect(w.size).toBe(28);
    w.rowEnded('concurrency', 2_000);
    w.rowEnded('rate', 1_000 + LIMIT_MEMORY_MS - 1);
    room(w, 10, 20_000);
    expect(w.size).toBe(28);
    expect(w.view(20_000)).toEqual({ size: 28, ceiling: 256, boundBy: 'concurrency' });
    w.rowEnded('rate', 1_000 + LIMIT_MEMORY_MS);
    expect(w.size).toBe(19); // floor(28 * 0.7)
  });

  it('after a cut it grows by one row per window of rows (congestion avoidance)', () => {
    const w = new AdaptiveWindow(AdaptiveWindow.start());
    room(w, 12, 0); // 20
    w.rowEnded('rate', 0); // 14
    const after = LIMIT_MEMORY_MS;
    room(w, 14, after);
    expect(w.size).toBe(14);
    room(w, 1, after);
    expect(w.size).toBe(15);
    expect(w.view(after)).toEqual({ size: 15, ceiling: 256 });
  });

  it('never above its ceiling nor below its floor, and the same decisions for the same history', () => {
    const report = fc.oneof(
      fc.constant<BindingLimit | undefined>(undefined),
      fc.constantFrom<BindingLimit>('open', 'rate', 'concurrency'),
    );
    fc.assert(
      fc.property(
        fc.record({ ceiling: fc.integer({ min: 1, max: 300 }), floor: fc.integer({ min: 1, max: 10 }) }),
        fc.array(fc.tuple(report, fc.integer({ min: 0, max: 40_000 })), { maxLength: 400 }),
        fc.constantFrom(undefined, 'sawtooth' as const),
        (options, history, rule) => {
          const a = new AdaptiveWindow(AdaptiveWindow.start(options, rule));
          const b = new AdaptiveWindow(AdaptiveWindow.start(options, rule));
          let now = 0;
          for (const [limit, step] of history) {
            now += step;
            const refused = step % 3 === 0;
            a.rowEnded(limit, now, refused);
            b.rowEnded(limit, now, refused);
            expect(a.size).toBeGreaterThanOrEqual(Math.min(options.floor, options.ceiling));
            expect(a.size).toBeLessThanOrEqual(options.ceiling);
          }
          expect(JSON.parse(JSON.stringify(a.state))).toEqual(b.state);
        },
      ),
    );
  });

  describe('the sawtooth rule (a limit that binds for good)', () => {
    /**
     * Rows end one every 100 ms for `seconds`, each reporting `limit`, the first ones (for `refusedMs`) after the
     * service's own 429; returns the sizes seen, one a second.
     */
    const steady = (w: AdaptiveWindow, limit: BindingLimit, seconds: number, refusedMs = 10_000) => {
      const sizes: number[] = [];
      for (let t = 0; t < seconds * 1000; t += 100) {
        w.rowEnded(limit, t, t < refusedMs);
        if (t % 1000 === 0) sizes.push(w.size);
      }
      return sizes;
    };

    it('the first rule starves under a limit every row reports: 0.7 every 30 s, down to the floor', () => {
      const w = new AdaptiveWindow(AdaptiveWindow.start());
      room(w, 52, 0); // 60
      const sizes = steady(w, 'rate', 600);
      expect(sizes.at(-1)).toBe(1);
    });

    it("a limit reported without the service's 429 (the worker's pace or gate holding rows) only holds it", () => {
      const w = new AdaptiveWindow(AdaptiveWindow.start({}, 'sawtooth'));
      room(w, 52, 0); // 60
      expect(new Set(steady(w, 'concurrency', 600, 0))).toEqual(new Set([60]));
    });

    it('is cut once by a 429 and then held while the limit binds; rows with room grow it again', () => {
      const w = new AdaptiveWindow(AdaptiveWindow.start({}, 'sawtooth'));
      room(w, 52, 0); // 60
      const sizes = steady(w, 'rate', 600);
      expect(new Set(sizes.slice(1))).toEqual(new Set([42])); // 60 * 0.7, for ten minutes
      room(w, 18, 600_000); // back to where it was cut at a row each, then one row per window of rows
      expect(w.size).toBe(60);
      room(w, 61, 600_000);
      expect(w.size).toBe(61);
    });

    it('a cut waits until the window has grown back to where it was last cut; reports below it hold it', () => {
      const w = new AdaptiveWindow(AdaptiveWindow.start({}, 'sawtooth'));
      room(w, 12, 0); // 20
      w.rowEnded('concurrency', 0, true);
      expect(w.size).toBe(14);
      w.rowEnded('concurrency', 1, true); // below 20: held, neither cut nor grown
      expect(w.state.size).toBeCloseTo(14, 5);
      room(w, 6, 2); // room: back to 20 at a row each
      expect(w.size).toBe(20);
      room(w, 400, 2); // then on, past 20
      const grown = w.size;
      expect(grown).toBeGreaterThan(20);
      w.rowEnded('concurrency', 3, true);
      expect(w.size).toBe(Math.floor(grown * 0.7));
      expect(w.state.cut).toMatchObject({ limit: 'concurrency', from: grown });
    });
  });
});
