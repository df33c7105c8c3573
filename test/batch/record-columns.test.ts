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
  'advice',
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
  advice: 'submit_again',
  resubmittable: 'true',
  error: '=HYPERLINK("x") Generation failed. (gave up after 3 attempts)',
  idempotency_keys: 'b/r1/1 b/r1/2',
  key_outcomes: 'failed refunded',
  creation_ids: 'cr_1',
  charged_usd: '0.0800',
  refunded_usd: '0.0800',
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
/** The safety filter's row after the user revised its prompt: resubmittable=false, but no money held. */
const revised = {
  id: 'r4',
  prompt: 'a red apple on a wooden table, morning light',
  model: 'flux-dev',
  state: 'failed',
  advice: 'revise_prompt',
  resubmittable: 'false',
  error: 'Prompt rejected by the safety filter.',
  idempotency_keys: 'b/r4/1',
  key_outcomes: 'failed',
  creation_ids: 'cr_4',
  charged_usd: '0.0400',
  refunded_usd: '0.0400',
  net_usd: '0.0000',
};

const PAID = /may have been paid: resolve it with imagebatch reconcile, do not submit it again/;

describe('errors.csv as a batch file: the record columns', () => {
  it('are known columns, and never reach a request', async () => {
    const path = tmp.file('ok.csv', errorsCsv([failed, { ...failed, id: 'r3', resubmittable: '', advice: '' }]));
    const report = await validateBatchFile(path);
    expect(report.problems).toEqual([]);
    expect([report.ok, report.validRows]).toEqual([true, 2]);
    const page = await readBatchPage(path, undefined);
    expect(page.rows.map((r) => [r.rowId, r.request])).toEqual([
      ['r1', { prompt: 'a cat', model: 'flux-dev', seed: 7 }],
      ['r3', { prompt: 'a cat', model: 'flux-dev', seed: 7 }],
    ]);
  });

  it('accept a row marked resubmittable=false that holds no money (a prompt revised after the safety filter)', async () => {
    const rejected = { ...revised, id: 'r5', advice: 'fix_row', key_outcomes: 'rejected', creation_ids: '' };
    const declined = { ...failed, id: 'r6', resubmittable: 'false', key_outcomes: 'declined refunded' };
    const path = tmp.file('revised.csv', errorsCsv([revised, rejected, declined]));
    const report = await validateBatchFile(path);
    expect(report.problems).toEqual([]);
    expect([report.ok, report.validRows]).toEqual([true, 3]);
    const page = await readBatchPage(path, undefined);
    expect(page.rows.map((r) => r.rowId)).toEqual(['r4', 'r5', 'r6']);
  });

  it('accept every state that holds no money without keys: failed, cancelled, not_run, not_started, or none', async () => {
    const rows = ['failed', 'cancelled', 'not_run', 'not_started', ''].map((state, i) => ({
      id: `s${i}`,
      prompt: 'a cat',
      model: 'flux-dev',
      state,
    }));
    const report = await validateBatchFile(tmp.file('states.csv', errorsCsv(rows)));
    expect(report.problems).toEqual([]);
    expect(report.validRows).toBe(5);
  });

  it('refuse a row whose key may hold money, naming its line and what to do', async () => {
    const path = tmp.file('paid.csv', errorsCsv([failed, cancelled]));
    const report = await validateBatchFile(path);
    expect([report.ok, report.validRows, report.invalidRows]).toEqual([false, 1, 1]);
    expect(report.problems.map((p) => [p.code, p.line, p.field, p.rowId])).toEqual([
      ['row.field_invalid', 3, 'key_outcomes', 'r2'],
    ]);
    const message = report.problems[0]!.message;
    expect(message).toContain('line 3');
    expect(message).toContain('cancelled');
    expect(message).toContain('unknown');
    expect(message).toMatch(PAID);
    const page = await readBatchPage(path, undefined);
    expect(page.rows.map((r) => r.rowId)).toEqual(['r1']);
    expect(page.problems.map((p) => [p.line, p.field])).toEqual([[3, 'key_outcomes']]);
  });

  it('refuse it even when its resubmittable cell says true: money decides, not the flag', async () => {
    const report = await validateBatchFile(tmp.file('flag.csv', errorsCsv([{ ...cancelled, resubmittable: 'true' }])));
    expect(report.problems.map((p) => [p.line, p.field])).toEqual([[2, 'key_outcomes']]);
    expect(report.problems[0]!.message).toMatch(PAID);
  });

  it('refuse every key outcome that may hold money, alone or after a refunded one', async () => {
    const outcomes = ['submitting', 'accepted', 'succeeded', 'unknown', 'lost', 'timed_out'];
    const rows = outcomes.map((o, i) => ({ ...failed, id: `k${i}`, key_outcomes: `refunded ${o}` }));
    const report = await validateBatchFile(tmp.file('outcomes.csv', errorsCsv(rows)));
    expect(report.validRows).toBe(0);
    expect(report.problems.map((p) => [p.line, p.field])).toEqual(outcomes.map((_, i) => [i + 2, 'key_outcomes']));
    for (const p of report.problems) expect(p.message).toMatch(PAID);
  });

  it('refuse the states that may have been paid, keys or not: unknown, images_unsaved, succeeded, reused, in_flight', async () => {
    const states = ['unknown', 'images_unsaved', 'succeeded', 'reused', 'in_flight'];
    const rows = states.map((state, i) => ({ ...failed, id: `p${i}`, state, key_outcomes: i === 0 ? 'refunded' : '' }));
    const report = await validateBatchFile(tmp.file('states-paid.csv', errorsCsv(rows)));
    expect(report.validRows).toBe(0);
    expect(report.problems.map((p) => [p.line, p.field, p.rowId])).toEqual(
      states.map((_, i) => [i + 2, 'state', `p${i}`]),
    );
    states.forEach((state, i) => {
      expect(report.problems[i]!.message).toContain(`state ${state}`);
      expect(report.problems[i]!.message).toMatch(PAID);
    });
  });

  it('refuse a state or key outcome it cannot read, since it cannot be trusted in the paying direction', async () => {
    const rows = [
      { ...failed, id: 'x1', state: 'paid?' },
      { ...failed, id: 'x2', key_outcomes: 'refunded maybe' },
    ];
    const report = await validateBatchFile(tmp.file('unreadable.csv', errorsCsv(rows)));
    expect(report.problems.map((p) => [p.line, p.field])).toEqual([
      [2, 'state'],
      [3, 'key_outcomes'],
    ]);
    expect(report.problems[0]!.message).toContain('"paid?"');
    expect(report.problems[1]!.message).toContain('"maybe"');
  });

  it('refuse it on a later page too (the cursor keeps the header), whatever its case or spaces', async () => {
    const path = tmp.file('later.csv', errorsCsv([failed, { ...cancelled, key_outcomes: ' Refunded  ACCEPTED ' }]));
    const { rows, pages } = await readAllPages(path, { maxRows: 1 });
    expect(rows.map((r) => r.rowId)).toEqual(['r1']);
    expect(pages.flatMap((p) => p.problems.map((q) => [q.line, q.field]))).toEqual([[3, 'key_outcomes']]);
  });

  it('leave every other unknown column an error', async () => {
    const report = await validateBatchFile(tmp.file('style.csv', 'prompt,model,state,style\na,m,failed,x\n'));
    expect(report.problems.map((p) => [p.code, p.field])).toEqual([['header.unknown_column', 'style']]);
  });
});
