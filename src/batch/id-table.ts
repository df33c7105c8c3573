/**
 * Remembers which row ids were seen, and on which line, in bounded memory for millions of rows.
 *
 * A `Map<string, number>` costs about 80-100 bytes of heap per short id (string, entry, hash bucket). This table
 * keeps only a 64-bit digest of each id and its line, in typed arrays (12 bytes a slot, load factor at most 0.7,
 * so 17-34 bytes per id, outside the JS heap): one million rows take at most about 34 MB, ten million 340 MB.
 * Two different ids share a digest with probability about n²/2⁶⁵ (below 10⁻⁵ for ten million ids); such a
 * collision would show as a false "duplicate id" naming both lines, which the user can check, never as a
 * missed duplicate.
 */
export class IdTable {
  private hi: Uint32Array;
  private lo: Uint32Array;
  /** Line of the first row with the id; 0 marks an empty slot (lines start at 1). */
  private lines: Uint32Array;
  private used = 0;

  constructor(initialCapacity = 1024) {
    let capacity = 16;
    while (capacity < initialCapacity) capacity *= 2;
    this.hi = new Uint32Array(capacity);
    this.lo = new Uint32Array(capacity);
    this.lines = new Uint32Array(capacity);
  }

  get size(): number {
    return this.used;
  }

  /** Records `id` as seen on `line`; returns the line of an earlier row with the same id, if any. */
  add(id: string, line: number): number | undefined {
    const [h, l] = digest(id);
    const earlier = this.insert(h, l, line);
    if (earlier === undefined) {
      this.used += 1;
      if (this.used * 10 > this.lines.length * 7) this.grow();
    }
    return earlier;
  }

  private insert(h: number, l: number, line: number): number | undefined {
    const mask = this.lines.length - 1;
    for (let i = (h ^ l) & mask; ; i = (i + 1) & mask) {
      const at = this.lines[i]!;
      if (at === 0) {
        this.hi[i] = h;
        this.lo[i] = l;
        this.lines[i] = line;
        return undefined;
      }
      if (this.hi[i] === h && this.lo[i] === l) return at;
    }
  }

  private grow(): void {
    const { hi, lo, lines } = this;
    this.hi = new Uint32Array(lines.length * 2);
    this.lo = new Uint32Array(lines.length * 2);
    this.lines = new Uint32Array(lines.length * 2);
    for (let i = 0; i < lines.length; i++) if (lines[i] !== 0) this.insert(hi[i]!, lo[i]!, lines[i]!);
  }
}

/** A 64-bit digest as two 32-bit halves (two multiply-xorshift lanes, cross-mixed at the end, as in cyrb53). */
function digest(s: string): [number, number] {
  let h1 = 0xdeadbeef ^ s.length;
  let h2 = 0x41c6ce57 ^ s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return [h1 >>> 0, h2 >>> 0];
}
