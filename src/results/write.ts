import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { imagesAskedFor, KeyOutcome, PriceSource, type CreationRequest, type KeyRecord } from '../model';
import { isRetryableFailureMessage } from '../api/contract';
import { RecordColumn } from '../batch/header';
import { recordMayBePaid } from '../batch/schema';
import type { ResultRow, ResultState } from './collect';
import { galleryHtml } from './gallery';
import { csvText, jsonLine } from '../util/file-text';

/** What to do with a row of errors.csv (its `advice` column). */
export const Advice = {
  /** Submit it again as it is: refunded or retryable failures past the limit, cancelled, not run, not started. */
  SubmitAgain: 'submit_again',
  /** The safety filter turned it down: as it is, it would end the same way; change the prompt first. */
  RevisePrompt: 'revise_prompt',
  /** The service rejected it on its merits (400, a model the account lacks): fix the row first. */
  FixRow: 'fix_row',
} as const;
export type Advice = (typeof Advice)[keyof typeof Advice];

export interface WrittenResults {
  resultsCsv: string;
  resultsJsonl: string;
  /** The rows safe to submit again: nothing of them may hold money. */
  errorsCsv: string;
  /** The rows that may have been paid: resolve them with `imagebatch reconcile`, never submit them again. */
  unresolvedCsv: string;
  gallery: string;
  /** The batch was still open (running, or paused): errors.csv holds only rows that ended. */
  open: boolean;
  rows: number;
  /** Rows in errors.csv. */
  errorRows: number;
  /** Rows of errors.csv per advice. */
  errorAdvice: Record<Advice, number>;
  /** Rows in unresolved.csv. */
  unresolvedRows: number;
  /** Succeeded rows that saved fewer images than their `num_images` asked for (`images_short` above 0). */
  imagesShortRows: number;
}

/** Key outcomes that say nothing of how the key ended: it may hold money, and may even still be running. */
const UNSETTLED: ReadonlySet<KeyOutcome> = new Set([
  KeyOutcome.Submitting,
  KeyOutcome.Accepted,
  KeyOutcome.Unknown,
  KeyOutcome.Lost,
  KeyOutcome.TimedOut,
]);

/**
 * The advice for a row of errors.csv, from its record; undefined when the row does not belong there: it succeeded,
 * is in flight, or was, or may have been, paid (its state, or a key whose outcome may hold money). A rejected key
 * (400, a model the account lacks) means fixing the row; a last key that failed with a failure string that is not
 * retryable (the safety filter) means revising the prompt; anything else may go out again as it is.
 */
export function adviceFor(
  state: ResultState,
  keys: readonly Pick<KeyRecord, 'outcome' | 'error'>[],
): Advice | undefined {
  if (
    recordMayBePaid(
      state,
      keys.map((k) => k.outcome),
    )
  )
    return undefined;
  if (keys.some((k) => k.outcome === KeyOutcome.Rejected)) return Advice.FixRow;
  const last = keys.at(-1);
  if (last?.outcome === KeyOutcome.Failed && !isRetryableFailureMessage(last.error ?? '')) return Advice.RevisePrompt;
  return Advice.SubmitAgain;
}

/**
 * Whether a row goes to unresolved.csv: it was, or may have been, paid and is not done. That is every row neither
 * in errors.csv nor in flight, but a succeeded row whose keys all ended; a succeeded row with a key of no known
 * outcome is there too (it should not happen, but such a key may hold money of its own).
 */
export function isUnresolved(state: ResultState, keys: readonly Pick<KeyRecord, 'outcome'>[]): boolean {
  if (state === 'in_flight') return false;
  // Done: its images are here (a reused row was paid by the earlier request that served it).
  if (state === 'succeeded' || state === 'reused') return keys.some((k) => UNSETTLED.has(k.outcome));
  return recordMayBePaid(
    state,
    keys.map((k) => k.outcome),
  );
}

/** One key of a row in results.jsonl; a figure the service never gave is null. */
export interface JsonlKey {
  attempt: number;
  idempotency_key: string;
  outcome: KeyOutcome;
  creation_id: string | null;
  charged_usd: number | null;
  refunded_usd: number | null;
  /** Where `charged_usd` came from: `creation`, `catalog` or `user`; null when not known. */
  price_source: PriceSource | null;
  error: string | null;
  /** Polls of its creation answered 404 ERR_NOT_FOUND while the service's reads lagged its writes; absent: none. */
  not_found_polls?: number;
}

/**
 * One line of results.jsonl: the row's record. A row without one (in flight, not started) has no keys and null
 * money (not known, which is not 0); `resubmittable` is null in flight, true for a row never started.
 */
export interface JsonlRecord {
  row_id: string;
  line: number;
  state: ResultState;
  prompt: string;
  model: string;
  /** Each saved image; `source` is where the creation's record held it (`images[0].url`), when known. */
  images: { path: string; sha256: string; bytes: number; url: string; source?: string }[];
  /** The images the row asked for: its `num_images`, else 1 (the service's default). */
  images_asked: number;
  /**
   * How many fewer images a succeeded row saved than it asked for (0: all of them); null for a row that did not
   * succeed. The creation was charged as the service charges it; the row still `succeeded` (see
   * docs/real-service.md, "Fewer images than asked").
   */
  images_short: number | null;
  keys: JsonlKey[];
  creation_ids: string[];
  charged_usd: number | null;
  refunded_usd: number | null;
  net_usd: number | null;
  /** Some of its money is counted at a price the user gave (`--price`) that the service never showed. */
  price_unconfirmed?: true;
  error: string | null;
  resubmittable: boolean | null;
  /** The row's cells of the columns the user owns (`--carry`, `--column`), exactly as in the batch file. */
  columns?: Record<string, string>;
}

/** Prefix of the user's own columns in results.csv: ours never contain a colon, so the two cannot clash. */
export const USER_COLUMN_PREFIX = 'col:';

/** The user's own column names over all rows, in the batch file's order. */
function userColumnNames(rows: readonly ResultRow[]): string[] {
  const names = new Set<string>();
  for (const r of rows) for (const name of Object.keys(r.row.columns ?? {})) names.add(name);
  return [...names];
}

const REQUEST_COLUMNS = ['negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;

/** The record columns of errors.csv (its advice included), in order; the batch reader knows them, never sends them. */
const RECORD_COLUMNS = Object.values(RecordColumn);

/**
 * Writes results.csv, results.jsonl, errors.csv, unresolved.csv and index.html into `outDir`, each atomically (a
 * temporary file renamed over the old one), so a reader never sees half a file and writing again is idempotent.
 * errors.csv holds only the rows safe to submit again, each with its advice; unresolved.csv the rows that may have
 * been paid. No row is in both, and every row neither succeeded nor in flight is in one of them.
 */
export async function writeResults(
  outDir: string,
  batchId: string,
  rows: readonly ResultRow[],
  options: { open?: boolean } = {},
): Promise<WrittenResults> {
  await mkdir(outDir, { recursive: true });
  const files = {
    resultsCsv: path.join(outDir, 'results.csv'),
    resultsJsonl: path.join(outDir, 'results.jsonl'),
    errorsCsv: path.join(outDir, 'errors.csv'),
    unresolvedCsv: path.join(outDir, 'unresolved.csv'),
    gallery: path.join(outDir, 'index.html'),
  };
  const errorRows: ErrorRow[] = [];
  const errorAdvice: Record<Advice, number> = { submit_again: 0, revise_prompt: 0, fix_row: 0 };
  for (const r of rows) {
    // A batch still open (running, or paused) starts its rows not started yet itself: they are no error to run again.
    if (options.open && r.state === 'not_started') continue;
    const advice = adviceFor(r.state, r.result?.keys ?? []);
    if (advice === undefined) continue;
    errorRows.push({ ...r, advice });
    errorAdvice[advice] += 1;
  }
  const unresolvedRows = rows.filter((r) => isUnresolved(r.state, r.result?.keys ?? []));
  const imagesShortRows = rows.filter((r) => (imagesShort(r).images_short ?? 0) > 0).length;
  await atomicWrite(files.resultsCsv, resultsCsv(rows));
  await atomicWrite(files.resultsJsonl, rows.map((r) => jsonLine(jsonRecord(r))).join('\n') + '\n');
  await atomicWrite(files.errorsCsv, errorsCsv(batchId, errorRows));
  await atomicWrite(files.unresolvedCsv, unresolvedCsv(batchId, unresolvedRows));
  await atomicWrite(files.gallery, galleryHtml(batchId, rows));
  return {
    ...files,
    open: options.open ?? false,
    rows: rows.length,
    errorRows: errorRows.length,
    errorAdvice,
    unresolvedRows: unresolvedRows.length,
    imagesShortRows,
  };
}

/**
 * The images a row asked for, and how many fewer a succeeded row saved (a creation may list fewer images than
 * `num_images`: the row succeeded with what came, and says so here rather than hiding it).
 */
function imagesShort(r: ResultRow): { images_asked: number; images_short: number | null } {
  const asked = imagesAskedFor(r.row.request.num_images);
  if (r.state !== 'succeeded') return { images_asked: asked, images_short: null };
  return { images_asked: asked, images_short: Math.max(0, asked - (r.result?.images.length ?? 0)) };
}

type ErrorRow = ResultRow & { advice: Advice };

function jsonRecord(r: ResultRow): JsonlRecord {
  const rec = r.result;
  return {
    row_id: r.row.rowId,
    line: r.row.line,
    state: r.state,
    prompt: r.row.request.prompt,
    model: r.row.request.model,
    images: (rec?.images ?? []).map((i) => ({
      path: i.path,
      sha256: i.sha256,
      bytes: i.bytes,
      url: i.url,
      ...(i.source === undefined ? {} : { source: i.source }),
    })),
    ...imagesShort(r),
    keys: (rec?.keys ?? []).map((k) => ({
      attempt: k.attempt,
      idempotency_key: k.idempotencyKey,
      outcome: k.outcome,
      creation_id: k.creationId ?? null,
      charged_usd: k.chargedUsd ?? null,
      refunded_usd: k.refundedUsd ?? null,
      price_source: k.priceSource ?? null,
      error: k.error ?? null,
      ...(k.notFoundPolls ? { not_found_polls: k.notFoundPolls } : {}),
    })),
    creation_ids: rec?.creationIds ?? [],
    charged_usd: rec?.chargedUsd ?? null,
    refunded_usd: rec?.refundedUsd ?? null,
    net_usd: rec?.netUsd ?? null,
    ...(rec?.keys.some((k) => k.priceSource === PriceSource.User && k.chargedUsd !== undefined)
      ? { price_unconfirmed: true as const }
      : {}),
    error: rec?.error ?? null,
    resubmittable: rec ? rec.resubmittable : r.state === 'not_started' ? true : null,
    ...(r.row.columns ? { columns: r.row.columns } : {}),
  };
}

/** A figure we format ourselves (digits, a point, maybe a minus): never a formula; empty when not known. */
const money = (usd: number | null): string => (usd === null ? '' : usd.toFixed(4));

/** The record's cells, shared by results.csv, errors.csv and unresolved.csv (the advice is errors.csv's own). */
function recordCells(j: JsonlRecord): Record<Exclude<RecordColumn, 'advice' | 'batch_id'>, string> {
  return {
    state: j.state,
    resubmittable: j.resubmittable === null ? '' : String(j.resubmittable),
    error: j.error ?? '',
    idempotency_keys: j.keys.map((k) => k.idempotency_key).join(' '),
    key_outcomes: j.keys.map((k) => k.outcome).join(' '),
    creation_ids: j.creation_ids.join(' '),
    charged_usd: money(j.charged_usd),
    refunded_usd: money(j.refunded_usd),
    net_usd: money(j.net_usd),
    // A row without its record (in flight, not started) says nothing; one with it, whether every figure is known,
    // or counted at a price the user gave that the service never showed.
    price_known:
      j.charged_usd === null && j.keys.length === 0
        ? ''
        : j.price_unconfirmed
          ? 'unconfirmed'
          : String(j.charged_usd !== null),
  };
}

function resultsCsv(rows: readonly ResultRow[]): string {
  const header = [
    'row_id',
    'line',
    'state',
    'prompt',
    'model',
    'images',
    'sha256',
    'images_short',
    'error',
    'resubmittable',
    'idempotency_keys',
    'key_outcomes',
    'creation_ids',
    'charged_usd',
    'refunded_usd',
    'net_usd',
    'price_known',
  ] as const;
  const own = userColumnNames(rows);
  const body = rows.map((r) => {
    const j = jsonRecord(r);
    const cells: Record<(typeof header)[number], string> = {
      ...recordCells(j),
      row_id: j.row_id,
      line: String(j.line),
      prompt: j.prompt,
      model: j.model,
      images: j.images.map((i) => i.path).join(' '),
      sha256: j.images.map((i) => i.sha256).join(' '),
      images_short: j.images_short === null ? '' : String(j.images_short),
    };
    return [...header.map((c) => cells[c]), ...own.map((c) => r.row.columns?.[c] ?? '')];
  });
  return csvText([[...header, ...own.map((c) => `${USER_COLUMN_PREFIX}${c}`)], ...body]);
}

/**
 * The rows safe to submit again: first in the batch file's own format (cells exactly as they were, since they are
 * sent again), so `imagebatch run errors.csv` runs them again, then each row's record and advice. The batch reader
 * knows the record columns, never sends them, and refuses a row whose record says it may have been paid.
 */
function errorsCsv(batchId: string, rows: readonly ErrorRow[]): string {
  const used = REQUEST_COLUMNS.filter((c) => rows.some((r) => r.row.request[c] !== undefined));
  const own = userColumnNames(rows);
  const header = ['id', 'prompt', 'model', ...used, ...own, ...RECORD_COLUMNS];
  const body = rows.map((r) => {
    const req: CreationRequest = r.row.request;
    const record: Record<RecordColumn, string> = {
      ...recordCells(jsonRecord(r)),
      advice: r.advice,
      batch_id: batchId,
    };
    return [
      r.row.rowId,
      req.prompt,
      req.model,
      ...used.map((c) => (req[c] === undefined ? '' : String(req[c]))),
      ...own.map((c) => r.row.columns?.[c] ?? ''),
      ...RECORD_COLUMNS.map((c) => record[c]),
    ];
  });
  return csvText([header, ...body], 3 + used.length + own.length);
}

/**
 * The rows that may have been paid, for a person and for `imagebatch reconcile`: each with its keys, their outcomes,
 * the money as known and the command that resolves it. Not a batch file: the batch reader refuses its rows.
 */
function unresolvedCsv(batchId: string, rows: readonly ResultRow[]): string {
  const header = [
    'id',
    'line',
    'state',
    'prompt',
    'model',
    'idempotency_keys',
    'key_outcomes',
    'creation_ids',
    'charged_usd',
    'refunded_usd',
    'net_usd',
    'price_known',
    'error',
    'next_step',
  ] as const;
  const nextStep = `imagebatch reconcile ${batchId}`;
  const body = rows.map((r) => {
    const j = jsonRecord(r);
    const cells: Record<(typeof header)[number], string> = {
      ...recordCells(j),
      id: j.row_id,
      line: String(j.line),
      prompt: j.prompt,
      model: j.model,
      // Served by another batch's request, whose outcome is that batch's to resolve.
      next_step: r.result?.reusedFrom ? `imagebatch reconcile ${r.result.reusedFrom.batchId}` : nextStep,
    };
    return header.map((c) => cells[c]);
  });
  return csvText([[...header], ...body]);
}

async function atomicWrite(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, 'utf8');
  await rename(tmp, file);
}
