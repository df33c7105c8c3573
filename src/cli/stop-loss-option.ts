import { Breaker, type StopLossOptions } from '../model';
import { checked } from './options';

/**
 * `--stop-loss`: the canary and the breakers of a batch, as comma-separated `name=value` (or `off`, every one off):
 * `canary=off`, `canary-failures=3`, `same-rejection=5`, `declined-share=0.5`, `declined-window=20`, `unknown=3`,
 * `price-tolerance=0`. A count of 0 (or a share of 0) switches that breaker off.
 * The help names the doc that lists them with their defaults (docs/using.md): the help fits one screen.
 */
export const STOP_LOSS_HELP = 'canary, breakers: name=value,... (docs/using.md)';

type Numeric = Exclude<keyof StopLossOptions, 'canary' | 'off'>;

/** Each numeric name: its field, the breaker that 0 switches off, and whether it is a share (0 to 1). */
const NUMERIC: Readonly<Record<string, { field: Numeric; breaker?: Breaker; share?: true; atLeastOne?: true }>> = {
  'canary-failures': { field: 'canaryFailures', atLeastOne: true },
  'same-rejection': { field: 'sameRejection', breaker: Breaker.SameRejection },
  'declined-share': { field: 'declinedShare', breaker: Breaker.Declined, share: true },
  'declined-window': { field: 'declinedWindow', atLeastOne: true },
  unknown: { field: 'unknownRows', breaker: Breaker.Unknown },
  'price-tolerance': { field: 'priceTolerance', share: true },
};

const NAMES = ['canary', ...Object.keys(NUMERIC), 'price'].join(', ');

export function parseStopLoss(raw: string): { value: StopLossOptions } | { problem: string } {
  const text = raw.trim();
  if (text === 'off') return { value: { canary: false, off: Object.values(Breaker) } };
  const out: StopLossOptions = {};
  const off = new Set<Breaker>();
  for (const part of text.split(',')) {
    const [name = '', value, extra] = part.split('=').map((s) => s.trim());
    if (value === undefined || extra !== undefined || value === '') {
      return {
        problem: `each entry must be name=value (names: ${NAMES}), or the whole option "off"; "${part}" is not`,
      };
    }
    if (name === 'canary' || name === 'price') {
      if (value !== 'on' && value !== 'off') return { problem: `${name} must be on or off` };
      if (name === 'canary') out.canary = value === 'on';
      else if (value === 'off') off.add(Breaker.PriceDiffers);
      continue;
    }
    const spec = NUMERIC[name];
    if (!spec) return { problem: `unknown name "${name}" (names: ${NAMES})` };
    const n = value === 'off' ? 0 : /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
    if (!Number.isFinite(n)) return { problem: `${name} must be a number` };
    if (spec.share && n > 1) return { problem: `${name} must be a share from 0 to 1` };
    if (!spec.share && !Number.isInteger(n)) return { problem: `${name} must be a whole number` };
    if (spec.atLeastOne && n < 1) return { problem: `${name} must be at least 1` };
    out[spec.field] = n;
    if (n === 0 && spec.breaker) off.add(spec.breaker);
  }
  return { value: { ...out, ...(off.size > 0 ? { off: [...off] } : {}) } };
}

/** The zod schema of `--stop-loss`. */
export const stopLossSchema = checked<StopLossOptions>(parseStopLoss);
