import type { BatchProgress, WaitReason } from '../workflows';
import { terminalText } from './terminal-text';

/** One line of progress for a person: bar, counts, spend, rate, ETA and why it waits. */
export function progressLine(p: BatchProgress, totalRows: number, width = 24): string {
  const ended = Object.values(p.counts).reduce((a, b) => a + b, 0);
  const ratio = totalRows > 0 ? Math.min(1, ended / totalRows) : 1;
  const filled = Math.round(ratio * width);
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
  const eta = p.rowsPerSecond > 0 && !p.done ? ` ETA ${formatSeconds((totalRows - ended) / p.rowsPerSecond)}` : '';
  const parts = [
    `${bar} ${ended}/${totalRows}`,
    `ok ${p.counts.succeeded}`,
    `failed ${p.counts.failed + p.counts.unknown}`,
    ...(p.counts.images_unsaved > 0 ? [`images unsaved ${p.counts.images_unsaved}`] : []),
    `in flight ${p.inFlight}`,
    spendText(p),
    `${p.rowsPerSecond.toFixed(1)} rows/s${eta}`,
  ];
  const why = waitText(p.waiting);
  if (why) parts.push(`waiting: ${why}`);
  return parts.join(' | ');
}

/**
 * What a batch spent, for a person: a figure only where it is known. "spent at least $X, plus N rows of unknown
 * price" when some rows' spend is not known; with a cap, what rows in flight reserve and what is left.
 */
export function spendText(
  p: Pick<BatchProgress, 'spentUsd'> &
    Partial<Pick<BatchProgress, 'unknownSpendRows' | 'reservedUsd' | 'unpricedInFlight' | 'spendCapUsd' | 'leftUsd'>>,
): string {
  const unknown = p.unknownSpendRows ?? 0;
  const spent =
    unknown > 0
      ? `spent at least $${p.spentUsd.toFixed(2)}, plus ${unknown} row${unknown === 1 ? '' : 's'} of unknown price`
      : `spent $${p.spentUsd.toFixed(2)}`;
  const unpriced = p.unpricedInFlight ?? 0;
  const inFlight = unpriced > 0 ? `, ${unpriced} in flight of unknown price` : '';
  if (p.spendCapUsd === undefined) return `${spent}${inFlight}`;
  return (
    `${spent}, reserved $${(p.reservedUsd ?? 0).toFixed(2)}${inFlight}, ` +
    `$${(p.leftUsd ?? 0).toFixed(2)} left of the $${p.spendCapUsd.toFixed(2)} cap`
  );
}

/** Why a batch waits, for a person; the texts that come from elsewhere (the service's, a pause reason) made inert. */
export function waitText(w: WaitReason | undefined): string | undefined {
  if (!w) return undefined;
  switch (w.kind) {
    case 'paused':
      return `paused (${terminalText(w.reason)})`;
    case 'batch_stop': {
      const url = w.details.topUpUrl ? terminalText(w.details.topUpUrl) : '';
      return `stopped by the service: ${terminalText(w.details.reason)}${url ? ` (top up: ${url})` : ''}`;
    }
    case 'spend_cap':
      return `spend cap ${w.capUsd} USD reached`;
    case 'price_unknown':
      return `spend cap ${w.capUsd} USD: no price known for ${w.models.map(terminalText).join(', ')} (resume with --price <model>=<usd>)`;
    case 'window_full':
      return undefined;
    case 'reading':
      return 'reading the file';
  }
}

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.ceil(s)}s`;
  return `${Math.floor(s / 60)}m${String(Math.ceil(s % 60)).padStart(2, '0')}s`;
}
