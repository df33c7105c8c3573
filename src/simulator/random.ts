/**
 * Deterministic pseudo-random numbers, so that a seed reproduces a run: fault rolls, generation times,
 * creation ids and images. Not cryptographic, and not meant to be.
 */

/** A generator of floats in [0, 1). */
export type Random = () => number;

/** A generator whose position can be saved: `mulberry32(r.state())` continues where `r` stands. */
export type SeededRandom = Random & { state: () => number };

/** mulberry32: tiny, fast, and good enough for simulation. Its whole state is one 32-bit integer. */
export function mulberry32(seed: number): SeededRandom {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Object.assign(next, { state: () => a });
}

/** FNV-1a over a string, mixed with a seed: derives independent streams (per creation, per image). */
export function hash32(text: string, seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** A uniform integer in [min, max]. */
export function uniformInt(random: Random, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/** A standard normal N(0, 1) by Box-Muller, from two draws of `random`. */
export function standardNormal(random: Random): number {
  const u = 1 - random(); // in (0, 1]: no log of 0
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}
