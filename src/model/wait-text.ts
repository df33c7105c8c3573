/** A wait in the unit it was most likely given in: `2 h`, `30 min`, `90 s`. */
export function formatWait(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 1000)} s`;
}
