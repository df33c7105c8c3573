import type { BatchProgress, WaitReason } from '../workflows';

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
    `$${p.spentUsd.toFixed(2)}`,
    `${p.rowsPerSecond.toFixed(1)} rows/s${eta}`,
  ];
  const why = waitText(p.waiting);
  if (why) parts.push(`waiting: ${why}`);
  return parts.join(' | ');
}

export function waitText(w: WaitReason | undefined): string | undefined {
  if (!w) return undefined;
  switch (w.kind) {
    case 'paused':
      return `paused (${w.reason})`;
    case 'batch_stop':
      return `stopped by the service: ${w.details.reason}${w.details.topUpUrl ? ` (top up: ${w.details.topUpUrl})` : ''}`;
    case 'spend_cap':
      return `spend cap ${w.capUsd} USD reached`;
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
