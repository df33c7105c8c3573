import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BatchCursor } from '../../src/model';
import { type BatchPage, type BatchRow, type ReadPageOptions, readBatchPage } from '../../src/batch';

/** A temp folder for one test file; `cleanup` is called from `afterAll`. */
export function tempDir(): {
  dir: string;
  file: (name: string, content: string | Buffer) => string;
  cleanup: () => void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'imagebatch-batch-'));
  return {
    dir,
    file: (name, content) => {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** RFC 4180 quoting: quote a field when it holds a comma, quote, CR or LF (or always), doubling inner quotes. */
export function csvField(value: string, always = false): string {
  return always || /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

export function csvLine(cells: readonly string[], always = false): string {
  return cells.map((c) => csvField(c, always)).join(',');
}

/** Reads every page in turn; fails the test on a page that does not advance, so a bug cannot loop forever. */
export async function readAllPages(
  path: string,
  options: ReadPageOptions = {},
  maxPages = 100_000,
): Promise<{ rows: BatchRow[]; pages: BatchPage[] }> {
  const rows: BatchRow[] = [];
  const pages: BatchPage[] = [];
  let cursor: BatchCursor | undefined;
  for (let i = 0; i < maxPages; i++) {
    const page = await readBatchPage(path, cursor, options);
    pages.push(page);
    rows.push(...page.rows);
    if (page.done) return { rows, pages };
    if (cursor !== undefined && page.nextCursor.byteOffset <= cursor.byteOffset) {
      throw new Error(`page ${i} did not advance from byte ${cursor.byteOffset}`);
    }
    cursor = page.nextCursor;
  }
  throw new Error(`more than ${maxPages} pages`);
}
