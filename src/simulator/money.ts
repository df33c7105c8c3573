/**
 * Money is kept in integer micro-dollars so that a million 0.04 charges and refunds add up exactly; USD
 * numbers appear only at the edges (config, responses, charge book views).
 */
export function toMicros(usd: number): number {
  return Math.round(usd * 1_000_000);
}

export function toUsd(micros: number): number {
  return micros / 1_000_000;
}
