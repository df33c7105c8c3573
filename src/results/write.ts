import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'csv-stringify/sync';
import type { CreationRequest } from '../activities/types';
import { RecordColumn } from '../batch/header';
import type { KeyOutcome } from '../workflows/model';
import type { ResultRow, ResultState } from './collect';
import { galleryHtml } from './gallery';

export interface WrittenResults {
  resultsCsv: string;
  resultsJsonl: string;
  errorsCsv: string;
  gallery: string;
  rows: number;
  /** Rows in errors.csv (every row that did not succeed and is not in flight). */
  errorRows: number;
}

/** One key of a row in results.jsonl; a figure the service never gave is null. */
export interface JsonlKey {
  attempt: number;
  idempotency_key: string;
  outcome: KeyOutcome;
  creation_id: string | null;
  charged_usd: number | null;
  refunded_usd: number | null;
  error: string | null;
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
  images: { path: string; sha256: string; bytes: number; url: string }[];
  keys: JsonlKey[];
  creation_ids: string[];
  charged_usd: number | null;
  refunded_usd: number | null;
  net_usd: number | null;
  error: string | null;
  resubmittable: boolean | null;
}

const REQUEST_COLUMNS = ['negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;

/** The record columns of errors.csv, in order; the batch reader knows them and never sends them. */
const RECORD_COLUMNS = Object.values(RecordColumn);

/**
 * Writes results.csv, results.jsonl, errors.csv and index.html into `outDir`, each atomically (a temporary
 * file renamed over the old one), so a reader never sees half a file and writing again is idempotent.
 */
export async function writeResults(
  outDir: string,
  batchId: string,
  rows: readonly ResultRow[],
): Promise<WrittenResults> {
  await mkdir(outDir, { recursive: true });
  const files = {
    resultsCsv: path.join(outDir, 'results.csv'),
    resultsJsonl: path.join(outDir, 'results.jsonl'),
    errorsCsv: path.join(outDir, 'errors.csv'),
    gallery: path.join(outDir, 'index.html'),
  };
  const errorRows = rows.filter((r) => r.state !== 'succeeded' && r.state !== 'in_flight');
  await atomicWrite(files.resultsCsv, resultsCsv(rows));
  await atomicWrite(files.resultsJsonl, rows.map((r) => JSON.stringify(jsonRecord(r))).join('\n') + '\n');
  await atomicWrite(files.errorsCsv, errorsCsv(errorRows));
  await atomicWrite(files.gallery, galleryHtml(batchId, rows));
  return { ...files, rows: rows.length, errorRows: errorRows.length };
}

function jsonRecord(r: ResultRow): JsonlRecord {
  const rec = r.result;
  return {
    row_id: r.row.rowId,
    line: r.row.line,
    state: r.state,
    prompt: r.row.request.prompt,
    model: r.row.request.model,
    images: (rec?.images ?? []).map((i) => ({ path: i.path, sha256: i.sha256, bytes: i.bytes, url: i.url })),
    keys: (rec?.keys ?? []).map((k) => ({
      attempt: k.attempt,
      idempotency_key: k.idempotencyKey,
      outcome: k.outcome,
      creation_id: k.creationId ?? null,
      charged_usd: k.chargedUsd ?? null,
      refunded_usd: k.refundedUsd ?? null,
      error: k.error ?? null,
    })),
    creation_ids: rec?.creationIds ?? [],
    charged_usd: rec?.chargedUsd ?? null,
    refunded_usd: rec?.refundedUsd ?? null,
    net_usd: rec?.netUsd ?? null,
    error: rec?.error ?? null,
    resubmittable: rec ? rec.resubmittable : r.state === 'not_started' ? true : null,
  };
}

/** A cell a spreadsheet would run as a formula gets a leading apostrophe (never a cell that is sent again). */
function safeCell(value: string): string {
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
}

/** A figure we format ourselves (digits, a point, maybe a minus): never a formula; empty when not known. */
const money = (usd: number | null): string => (usd === null ? '' : usd.toFixed(4));

/** The record's cells, shared by results.csv and errors.csv. */
function recordCells(j: JsonlRecord): Record<RecordColumn, string> {
  return {
    state: j.state,
    resubmittable: j.resubmittable === null ? '' : String(j.resubmittable),
    error: safeCell(j.error ?? ''),
    idempotency_keys: safeCell(j.keys.map((k) => k.idempotency_key).join(' ')),
    key_outcomes: j.keys.map((k) => k.outcome).join(' '),
    creation_ids: safeCell(j.creation_ids.join(' ')),
    charged_usd: money(j.charged_usd),
    refunded_usd: money(j.refunded_usd),
    net_usd: money(j.net_usd),
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
    'error',
    'resubmittable',
    'idempotency_keys',
    'key_outcomes',
    'creation_ids',
    'charged_usd',
    'refunded_usd',
    'net_usd',
  ] as const;
  const body = rows.map((r) => {
    const j = jsonRecord(r);
    const cells: Record<(typeof header)[number], string> = {
      ...recordCells(j),
      row_id: safeCell(j.row_id),
      line: String(j.line),
      prompt: safeCell(j.prompt),
      model: safeCell(j.model),
      images: safeCell(j.images.map((i) => i.path).join(' ')),
      sha256: j.images.map((i) => i.sha256).join(' '),
    };
    return header.map((c) => cells[c]);
  });
  return stringify([[...header], ...body]);
}

/**
 * The rows that did not succeed: first in the batch file's own format (cells exactly as they were, since they are
 * sent again), so `imagebatch run errors.csv` runs them again, then each row's record. The batch reader knows the
 * record columns, never sends them, and refuses a row whose `resubmittable` is false.
 */
function errorsCsv(rows: readonly ResultRow[]): string {
  const used = REQUEST_COLUMNS.filter((c) => rows.some((r) => r.row.request[c] !== undefined));
  const header = ['id', 'prompt', 'model', ...used, ...RECORD_COLUMNS];
  const body = rows.map((r) => {
    const req: CreationRequest = r.row.request;
    const record = recordCells(jsonRecord(r));
    return [
      r.row.rowId,
      req.prompt,
      req.model,
      ...used.map((c) => (req[c] === undefined ? '' : String(req[c]))),
      ...RECORD_COLUMNS.map((c) => record[c]),
    ];
  });
  return stringify([header, ...body]);
}

async function atomicWrite(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, 'utf8');
  await rename(tmp, file);
}
