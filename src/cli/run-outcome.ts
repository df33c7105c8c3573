import type { LedgerStore } from '../ledger';
import type { BatchProgress, RowState } from '../model';
import { ExitCode } from './errors';

/**
 * What `run` says and exits with once a batch it followed has ended: the exit code from the rows' states, and, for
 * a batch that ran before (or whose rows were served by earlier requests), what was sent and paid now against what
 * was paid earlier, from the ledger store (the worker's: every key it sent, with what the service said it cost).
 */

/**
 * The states of a row that has no images, which a followed batch exits 1 for: `failed` (refused, the safety filter,
 * refunded failures past the limit), `unknown` (an outcome, so a price, not known), `images_unsaved` (paid, the
 * images not saved), `cancelled` and `not_run` (the batch was cancelled, or its deadline passed, first). Only
 * `succeeded` and `reused` rows have their images.
 */
export const ROWS_WITHOUT_IMAGES: readonly RowState[] = ['failed', 'unknown', 'images_unsaved', 'cancelled', 'not_run'];

const rowsText = (n: number) => `${n} row${n === 1 ? '' : 's'}`;

/**
 * The exit code of a followed batch that ended, and the line that says why when it is 1. Without `allowPartial`: 1
 * when any row ended in {@link ROWS_WITHOUT_IMAGES}. With it: 1 only when no row succeeded (or was reused).
 */
export function runExit(final: BatchProgress, allowPartial: boolean): { code: ExitCode; line?: string } {
  const c = final.counts;
  const withImages = c.succeeded + c.reused;
  const without = ROWS_WITHOUT_IMAGES.filter((s) => c[s] > 0);
  const missing = without.reduce((n, s) => n + c[s], 0);
  if (missing === 0) return { code: ExitCode.Ok };
  const which = without.map((s) => `${c[s]} ${s}`).join(', ');
  if (withImages === 0) {
    return { code: ExitCode.Failure, line: `batch ${final.batchId}: no row succeeded (${which}): exit 1` };
  }
  if (allowPartial) return { code: ExitCode.Ok };
  return {
    code: ExitCode.Failure,
    line:
      `batch ${final.batchId}: ${rowsText(missing)} without images (${which}): exit 1 ` +
      '(--allow-partial exits 0 when some rows succeeded)',
  };
}

/** What the ledger store holds of a batch's keys at one moment: how many, what they cost, and where the store was. */
export interface SpendMark {
  keys: number;
  paidUsd: number;
  /** The store's position of its last key, any batch's (0: none): the keys recorded after it are this run's. */
  lastSeq: number;
}

const PAGE = 1000;

/** The batch's keys in the store now (a batch that never sent: zeros); read before a run starts. */
export async function spendMark(ledger: LedgerStore, batchId: string): Promise<SpendMark> {
  const [summary] = await ledger.summarize('batch', batchId);
  return { keys: summary?.keys ?? 0, paidUsd: summary?.paidUsd ?? 0, lastSeq: await ledger.lastKeyPosition() };
}

/** What a run sent: keys, the rows they were for, and what the service said those keys cost (USD, as known). */
export interface SentNow {
  keys: number;
  rows: number;
  paidUsd: number;
}

/** The keys of the batch sent since `mark`, by the rows they were for. */
export async function sentSince(ledger: LedgerStore, batchId: string, mark: SpendMark): Promise<SentNow> {
  const [summary] = await ledger.summarize('batch', batchId);
  const keys = (summary?.keys ?? 0) - mark.keys;
  const rows = new Set<string>();
  for (let after = mark.lastSeq, done = keys <= 0; !done;) {
    const page = await ledger.keys(after, PAGE, batchId);
    for (const key of page.keys) rows.add(key.rowId);
    after = page.next;
    done = page.done;
  }
  const paidUsd = Math.round(((summary?.paidUsd ?? 0) - mark.paidUsd) * 1e6) / 1e6;
  return { keys: Math.max(0, keys), rows: rows.size, paidUsd: Math.max(0, paidUsd) };
}

const usd = (n: number) => `$${n.toFixed(2)}`;

/**
 * The line for a batch run again, or served by earlier requests: what it sent now and what was paid earlier,
 * `batch prompts is complete: 19 rows, nothing new sent ($0.76 paid earlier)`, or `..., 5 new ($0.20 paid now),
 * $0.56 paid earlier`. The batch's spend counts every row from its record, the earlier run's too: what this run
 * paid is the store's difference.
 */
export function rerunLine(final: BatchProgress, rows: number, sent: SentNow): string {
  const state = final.status === 'completed' ? 'is complete' : `ended ${final.status}`;
  const earlierUsd = Math.max(0, Math.round((final.spentUsd - sent.paidUsd) * 100) / 100);
  const reused = final.counts.reused;
  const earlier = [
    ...(earlierUsd > 0 || reused === 0 ? [`${usd(earlierUsd)} paid earlier`] : []),
    ...(reused > 0 ? [`${reused} reused (paid before)`] : []),
  ].join(', ');
  const head = `batch ${final.batchId} ${state}: ${rowsText(rows)}`;
  if (sent.keys === 0) return `${head}, nothing new sent (${earlier})`;
  return `${head}, ${sent.rows} new (${usd(sent.paidUsd)} paid now), ${earlier}`;
}
