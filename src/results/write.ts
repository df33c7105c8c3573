import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'csv-stringify/sync';
import type { CreationRequest } from '../activities/types';
import type { ResultRow } from './collect';
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

const REQUEST_COLUMNS = ['negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;

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

function jsonRecord(r: ResultRow) {
  return {
    row_id: r.row.rowId,
    line: r.row.line,
    state: r.state,
    prompt: r.row.request.prompt,
    model: r.row.request.model,
    images: r.result?.images ?? [],
    error: r.result?.error ?? null,
    error_retryable: r.result?.errorRetryable ?? null,
    attempts: r.result?.attempts.length ?? 0,
    creation_ids: r.result?.creationIds ?? [],
    unknown_idempotency_key: r.result?.unknownKey ?? null,
    charged_usd: r.result?.chargedUsd ?? 0,
    refunded_usd: r.result?.refundedUsd ?? 0,
  };
}

/** A cell a spreadsheet would run as a formula gets a leading apostrophe (results.csv only, never errors.csv). */
function safeCell(value: string): string {
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
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
    'error_retryable',
    'attempts',
    'creation_ids',
    'charged_usd',
    'refunded_usd',
  ];
  const body = rows.map((r) => {
    const j = jsonRecord(r);
    return [
      j.row_id,
      String(j.line),
      j.state,
      j.prompt,
      j.model,
      j.images.map((i) => i.path).join(' '),
      j.images.map((i) => i.sha256).join(' '),
      j.error ?? '',
      j.error_retryable === null ? '' : String(j.error_retryable),
      String(j.attempts),
      j.creation_ids.join(' '),
      j.charged_usd.toFixed(4),
      j.refunded_usd.toFixed(4),
    ].map(safeCell);
  });
  return stringify([header, ...body]);
}

/** The rows that did not succeed, in the batch file's own format, so `imagebatch run errors.csv` retries them. */
function errorsCsv(rows: readonly ResultRow[]): string {
  const used = REQUEST_COLUMNS.filter((c) => rows.some((r) => r.row.request[c] !== undefined));
  const header = ['id', 'prompt', 'model', ...used];
  const body = rows.map((r) => {
    const req: CreationRequest = r.row.request;
    return [r.row.rowId, req.prompt, req.model, ...used.map((c) => (req[c] === undefined ? '' : String(req[c])))];
  });
  return stringify([header, ...body]);
}

async function atomicWrite(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, 'utf8');
  await rename(tmp, file);
}
