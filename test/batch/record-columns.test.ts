import { afterAll, describe, expect, it } from 'vitest';
import { readBatchPage, validateBatchFile } from '../../src/batch';
import { csvLine, readAllPages, tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** The header of an errors.csv: the batch-file columns, then the record columns. */
const HEADER = [
  'id',
  'prompt',
  'model',
  'seed',
  'state',
  'resubmittable',
  'error',
  'idempotency_keys',
  'key_outcomes',
  'creation_ids',
  'charged_usd',
  'refunded_usd',
  'net_usd',
];

function errorsCsv(rows: readonly Partial<Record<string, string>>[]): string {
  return [csvLine(HEADER), ...rows.map((r) => csvLine(HEADER.map((c) => r[c] ?? '')))].join('\n') + '\n';
}

const failed = {
  id: 'r1',
  prompt: 'a cat',
  model: 'flux-dev',
  seed: '7',
  state: 'failed',
  resubmittable: 'true',
  error: '=HYPERLINK("x") rejected: prompt blocked',
  idempotency_keys: 'b/r1/1',
  key_outcomes: 'rejected',
  creation_ids: '',
  charged_usd: '0.0000',
  refunded_usd: '0.0000',
  net_usd: '0.0000',
};
const cancelled = {
  id: 'r2',
  prompt: 'a dog',
  model: 'flux-dev',
  state: 'cancelled',
  resubmittable: 'false',
  error: 'cancelled',
  idempotency_keys: 'b/r2/1',
  key_outcomes: 'unknown',
  creation_ids: 'cr_2',
  charged_usd: '0.0400',
  refunded_usd: '0.0000',
  net_usd: '0.0400',
};

describe('errors.csv as a batch file: the record columns', () => {
  it('are known columns, and never reach a request', async () => {
    const path = tmp.file('ok.csv', errorsCsv([failed, { ...failed, id: 'r3', resubmittable: '' }]));
    const report = await validateBatchFile(path);
    expect(report.problems).toEqual([]);
    expect([report.ok, report.validRows]).toEqual([true, 2]);
    const page = await readBatchPage(path, undefined);
    expect(page.rows.map((r) => [r.rowId, r.request])).toEqual([
      ['r1', { prompt: 'a cat', model: 'flux-dev', seed: 7 }],
      ['r3', { prompt: 'a cat', model: 'flux-dev', seed: 7 }],
    ]);
  });

  it('refuse a row marked resubmittable=false, naming its line and why', async () => {
    const path = tmp.file('paid.csv', errorsCsv([failed, cancelled]));
    const report = await validateBatchFile(path);
    expect([report.ok, report.validRows, report.invalidRows]).toEqual([false, 1, 1]);
    expect(report.problems.map((p) => [p.code, p.line, p.field, p.rowId])).toEqual([
      ['row.field_invalid', 3, 'resubmittable', 'r2'],
    ]);
    const message = report.problems[0]!.message;
    expect(message).toContain('line 3');
    expect(message).toContain('cancelled');
    expect(message).toMatch(/paid/);
    expect(message).toMatch(/pay twice/);
    expect(message).toContain('results.csv');
    expect(message).toMatch(/own key/);
    const page = await readBatchPage(path, undefined);
    expect(page.rows.map((r) => r.rowId)).toEqual(['r1']);
    expect(page.problems.map((p) => [p.line, p.field])).toEqual([[3, 'resubmittable']]);
  });

  it('refuse it on a later page too (the cursor keeps the header), whatever its case or spaces', async () => {
    const path = tmp.file('later.csv', errorsCsv([failed, { ...cancelled, resubmittable: ' FALSE ' }]));
    const { rows, pages } = await readAllPages(path, { maxRows: 1 });
    expect(rows.map((r) => r.rowId)).toEqual(['r1']);
    expect(pages.flatMap((p) => p.problems.map((q) => [q.line, q.field]))).toEqual([[3, 'resubmittable']]);
  });

  it('refuse a resubmittable cell that is neither true nor false', async () => {
    const report = await validateBatchFile(tmp.file('maybe.csv', errorsCsv([{ ...failed, resubmittable: 'maybe' }])));
    expect(report.problems.map((p) => [p.code, p.line, p.field])).toEqual([['row.field_invalid', 2, 'resubmittable']]);
    expect(report.problems[0]!.message).toContain('"maybe"');
  });

  it('leave every other unknown column an error', async () => {
    const report = await validateBatchFile(tmp.file('style.csv', 'prompt,model,state,style\na,m,failed,x\n'));
    expect(report.problems.map((p) => [p.code, p.field])).toEqual([['header.unknown_column', 'style']]);
  });
});
