import {
  BatchStopReason,
  type BatchProgress,
  type BatchStopDetails,
  type BindingLimit,
  type WaitReason,
} from '../model';
import { fitWidth, terminalText, terminalWidth } from './terminal-text';

/** Options of {@link progressLine}. */
export interface ProgressLineOptions {
  /**
   * The most terminal columns the line may take. A longer line is made to fit: the bar shrinks, fields take their
   * short forms, the rate and the rows in flight go, then the line is cut with `…` (on a terminal a longer line
   * wraps, and each redraw leaves the wrapped part behind).
   * @default Infinity (every field in full)
   */
  columns?: number;
  /**
   * SGR colors for a terminal: the bar green, `failed` red when rows failed, why the batch waits yellow.
   * @default false
   */
  color?: boolean;
}

/** How a piece of the line is colored, when it is. */
type Tone = 'good' | 'bad' | 'warn';
const SGR: Record<Tone, string> = { good: '\x1b[32m', bad: '\x1b[31m', warn: '\x1b[33m' };
const SGR_RESET = '\x1b[39m';

interface Segment {
  text: string;
  tone?: Tone;
}

/** A field's forms, longest first; an empty form drops the field. */
type Forms = Segment[][];

type FieldName = 'count' | 'ok' | 'failed' | 'unsaved' | 'inFlight' | 'spend' | 'prices' | 'rate' | 'limit' | 'waiting';
/** Which field gives up its current form next when the line does not fit, in order. */
const SHRINK_ORDER: readonly FieldName[] = [
  'count',
  'spend',
  'prices',
  'unsaved',
  'limit',
  'rate',
  'inFlight',
  'limit',
  'rate',
  'count',
];
const SEPARATOR = ' | ';
const BAR_WIDTHS = [24, 10] as const;

/** One line of progress for a person: bar, counts, spend, rate, ETA and why it waits. */
export function progressLine(p: BatchProgress, totalRows: number, options: ProgressLineOptions = {}): string {
  const columns = options.columns ?? Infinity;
  const fields = progressFields(p, totalRows);
  const chosen = Object.fromEntries(Object.keys(fields).map((k) => [k, 0])) as Record<FieldName, number>;
  let line = layout(fields, chosen);
  for (const name of SHRINK_ORDER) {
    if (width(line) <= columns) break;
    if (chosen[name] < fields[name].length - 1) chosen[name] += 1;
    line = layout(fields, chosen);
  }
  return render(cut(line, columns), options.color ?? false);
}

function progressFields(p: BatchProgress, totalRows: number): Record<FieldName, Forms> {
  const ended = Object.values(p.counts).reduce((a, b) => a + b, 0);
  const ratio = totalRows > 0 ? Math.min(1, ended / totalRows) : 1;
  const count = `${ended}/${totalRows}`;
  const bar = (w: number): Segment[] => {
    const filled = Math.round(ratio * w);
    return [{ text: '[' }, { text: '#'.repeat(filled), tone: 'good' }, { text: `${'-'.repeat(w - filled)}] ${count}` }];
  };
  const failed = p.counts.failed + p.counts.unknown;
  const unsaved = p.counts.images_unsaved;
  const eta = p.rowsPerSecond > 0 && !p.done ? `ETA ${formatSeconds((totalRows - ended) / p.rowsPerSecond)}` : '';
  const rate = `${p.rowsPerSecond.toFixed(1)} rows/s`;
  const why = waitText(p.waiting);
  const one = (text: string, tone?: Tone): Segment[] => [tone ? { text, tone } : { text }];
  const reused = p.counts.reused ?? 0;
  const ok = p.counts.succeeded + reused;
  // The limit a row reported last, or the one that cut the window.
  const cutBy = p.window?.boundBy === 'ceiling' ? undefined : p.window?.boundBy;
  const limit = p.limit && p.limit !== 'open' ? p.limit : cutBy;
  return {
    count: [...BAR_WIDTHS.map(bar), one(count)],
    ok: reused > 0 ? [one(`ok ${ok} (${reused} reused)`), one(`ok ${ok}`)] : [one(`ok ${ok}`)],
    failed: [one(`failed ${failed}`, failed > 0 ? 'bad' : undefined)],
    unsaved: unsaved > 0 ? [one(`images unsaved ${unsaved}`), one(`unsaved ${unsaved}`)] : [[]],
    // With the adaptive window: the rows in flight out of the window's size now.
    inFlight: p.window
      ? [one(`in flight ${p.inFlight}/${p.window.size}`), one(`in flight ${p.inFlight}`), []]
      : [one(`in flight ${p.inFlight}`), []],
    spend: [one(spendText(p)), one(shortSpendText(p))],
    prices: p.pricesSeen?.length
      ? [one(pricesSeenText(p.pricesSeen), 'warn'), one('charged above the price given', 'warn')]
      : [[]],
    rate: [one(eta ? `${rate} ${eta}` : rate), one(eta || rate), []],
    limit: limit ? [...LIMIT_TEXT[limit].map((t) => one(t)), []] : [[]],
    waiting: [why ? one(`waiting: ${why}`, 'warn') : []],
  };
}

/** The fields in their chosen forms, in order, with separators. */
function layout(fields: Record<FieldName, Forms>, chosen: Record<FieldName, number>): Segment[] {
  const shown = (Object.keys(fields) as FieldName[])
    .map((name) => fields[name][chosen[name]] ?? [])
    .filter((form) => form.length > 0);
  return shown.flatMap((form, i) => (i === 0 ? form : [{ text: SEPARATOR }, ...form]));
}

function width(line: readonly Segment[]): number {
  return line.reduce((w, s) => w + terminalWidth(s.text), 0);
}

/** `line` cut to `columns`, the cut marked with `…`. */
function cut(line: readonly Segment[], columns: number): Segment[] {
  if (width(line) <= columns) return [...line];
  const out: Segment[] = [];
  let left = columns;
  for (const s of line) {
    const w = terminalWidth(s.text);
    if (w < left) {
      out.push(s);
      left -= w;
      continue;
    }
    out.push({ ...s, text: fitWidth(s.text, left) });
    break;
  }
  return out;
}

function render(line: readonly Segment[], color: boolean): string {
  return line.map((s) => (color && s.tone && s.text ? `${SGR[s.tone]}${s.text}${SGR_RESET}` : s.text)).join('');
}

/** {@link spendText} in few columns: `spent $X`, `+` when some rows' spend is unknown, `/$cap` with a cap. */
function shortSpendText(p: BatchProgress): string {
  const plus = p.unknownSpendRows > 0 || p.unpricedInFlight > 0 ? '+' : '';
  const cap = p.spendCapUsd === undefined ? '' : `/$${p.spendCapUsd.toFixed(2)}`;
  const yours = p.unconfirmedUsd ? ' at your price' : '';
  return `spent $${p.spentUsd.toFixed(2)}${plus}${yours}${cap}`;
}

/**
 * What a batch spent, for a person: a figure only where it is known. "spent at least $X, plus N rows of unknown
 * price" when some rows' spend is not known; "at your price, unconfirmed" for spend counted at a price given that
 * the service never showed; with a cap, what rows in flight reserve and what is left.
 */
export function spendText(
  p: Pick<BatchProgress, 'spentUsd'> &
    Partial<
      Pick<
        BatchProgress,
        'unknownSpendRows' | 'reservedUsd' | 'unpricedInFlight' | 'spendCapUsd' | 'leftUsd' | 'unconfirmedUsd'
      >
    >,
): string {
  const unknown = p.unknownSpendRows ?? 0;
  const yours = p.unconfirmedUsd ?? 0;
  const unconfirmed =
    yours <= 0
      ? ''
      : yours >= p.spentUsd
        ? ' at your price, unconfirmed'
        : ` ($${yours.toFixed(2)} of it at your price, unconfirmed)`;
  const spent =
    unknown > 0
      ? `spent at least $${p.spentUsd.toFixed(2)}${unconfirmed}, plus ${unknown} row${unknown === 1 ? '' : 's'} of unknown price`
      : `spent $${p.spentUsd.toFixed(2)}${unconfirmed}`;
  const unpriced = p.unpricedInFlight ?? 0;
  const inFlight = unpriced > 0 ? `, ${unpriced} in flight of unknown price` : '';
  if (p.spendCapUsd === undefined) return `${spent}${inFlight}`;
  return (
    `${spent}, reserved $${(p.reservedUsd ?? 0).toFixed(2)}${inFlight}, ` +
    `$${(p.leftUsd ?? 0).toFixed(2)} left of the $${p.spendCapUsd.toFixed(2)} cap`
  );
}

/**
 * Prices given that the service's charges contradict, for a person: `flux-dev charged $0.04/image, above the $0.01
 * given (--price): the cap counts $0.04`.
 */
export function pricesSeenText(seen: NonNullable<BatchProgress['pricesSeen']>): string {
  return seen
    .map(
      (s) =>
        `${terminalText(s.model)} charged $${s.chargedUsd}/image, above the $${s.givenUsd} given ` +
        `(${s.source === 'user' ? '--price' : 'catalog'}): the cap counts $${s.chargedUsd}`,
    )
    .join('; ');
}

/** Why a batch waits, for a person; the texts that come from elsewhere (the service's, a pause reason) made inert. */
export function waitText(w: WaitReason | undefined): string | undefined {
  if (!w) return undefined;
  switch (w.kind) {
    case 'paused':
      return `paused (${terminalText(w.reason)})`;
    case 'batch_stop':
      return stopText(w.details);
    case 'spend_cap':
      return `spend cap ${w.capUsd} USD reached`;
    case 'price_unknown':
      return `spend cap ${w.capUsd} USD: no price known for ${w.models.map(terminalText).join(', ')} (resume with --price <model>=<usd>)`;
    case 'stop_loss':
      return `paused by its stop-loss (${w.trip.breaker}; imagebatch resume goes on)`;
    case 'canary':
      return `row ${terminalText(w.rowId)} is sent alone first (the canary)`;
    case 'price_unconfirmed':
      return `one row at a time until the service shows what ${terminalText(w.model)} costs (you gave $${w.givenUsd})`;
    case 'window_full':
      return undefined;
    case 'reading':
      return 'reading the file';
  }
}

/**
 * What a person must read in full when a batch pauses for a reason only they can remove (a stop of the service, the
 * stop-loss), as one line above the progress; undefined for any other wait.
 */
export function pauseNotice(batchId: string, w: WaitReason | undefined): string | undefined {
  const then = `then: imagebatch resume ${terminalText(batchId)}`;
  switch (w?.kind) {
    case 'stop_loss':
      return `batch paused by its stop-loss (${w.trip.breaker}): ${terminalText(w.trip.message)}; ${then}`;
    case 'batch_stop':
      return `batch paused: ${terminalText(w.details.message)}; ${then}`;
    default:
      return undefined;
  }
}

/** The limit that binds, for a person, in full and short; nothing is shown when none does. */
const LIMIT_TEXT: Readonly<Record<Exclude<BindingLimit, 'open'>, readonly [full: string, short: string]>> = {
  rate: ["bound by the key's request rate", 'rate-bound'],
  concurrency: ["bound by the account's creations in flight", 'quota-bound'],
};

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.ceil(s)}s`;
  return `${Math.floor(s / 60)}m${String(Math.ceil(s % 60)).padStart(2, '0')}s`;
}

/**
 * A batch stop for a person: one the service decided by its reason (and top-up link); one the worker decided (a wrong
 * creation path, its own configuration, a status in no set) by its message, which says what to change.
 */
function stopText(details: BatchStopDetails): string {
  const reason = details.reason;
  switch (reason) {
    case BatchStopReason.CreationPathNotFound:
    case BatchStopReason.WorkerConfig:
    case BatchStopReason.UnrecognisedStatus:
    case BatchStopReason.ImagesRefused:
    case BatchStopReason.KeyNotKept:
      return `stopped: ${terminalText(details.message)}`;
    case BatchStopReason.AuthenticationRequired:
    case BatchStopReason.ApiKeyInvalid:
    case BatchStopReason.AccountDisabled:
    case BatchStopReason.InsufficientBalance:
    case BatchStopReason.MonthlyBudgetExceeded:
      break;
  }
  // The service's reasons, and any other a history may carry.
  const url = details.topUpUrl ? terminalText(details.topUpUrl) : '';
  return `stopped by the service: ${terminalText(reason)}${url ? ` (top up: ${url})` : ''}`;
}
