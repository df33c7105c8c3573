/**
 * Cases per property: the count given here, times `IMAGEBATCH_FUZZ_SCALE` (default 1) for a longer hunt on
 * demand, e.g. `IMAGEBATCH_FUZZ_SCALE=20 npx vitest run test/fuzz`. Never fewer than one.
 */
export function runs(count: number): number {
  const scale = Number(process.env.IMAGEBATCH_FUZZ_SCALE ?? '1');
  return Math.max(1, Math.round(count * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

/** Strings nested `depth` levels deep: `[[[...]]]` and `{"a":{"a":...1}}`. */
export function deepArrays(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

export function deepObjects(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}
