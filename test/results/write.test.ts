import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { defaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BatchRow, readBatchPage, validateBatchFile } from '../../src/batch';
import { FailureMessage } from '../../src/api/contract';
import { collectResults, type ResultRow, writeResults } from '../../src/results';
import { adviceFor, isUnresolved } from '../../src/results/write';
import { promptWorkflowId, type KeyOutcome, type KeyRecord, type RowRecord } from '../../src/model';
import { rowRecord } from '../helpers/records';
import { lazyTempLedger } from '../helpers/ledger';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-results-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const BATCH = 'b';

function batchRow(rowId: string, line: number, extra: Partial<BatchRow['request']> = {}): BatchRow {
  return { rowId, line, request: { prompt: `prompt of ${rowId}`, model: 'flux-dev', ...extra } };
}

function record(row: BatchRow, fields: Partial<RowRecord> & Pick<RowRecord, 'state'>): RowRecord {
  return rowRecord({
    batchId: BATCH,
    rowId: row.rowId,
    line: row.line,
    prompt: row.request.prompt,
    model: row.request.model,
    ...fields,
  });
}

function done(row: BatchRow, fields: Partial<RowRecord> & Pick<RowRecord, 'state'>): ResultRow {
  const result = record(row, fields);
  return { row, state: result.state, result };
}

const rows = {
  succeeded: batchRow('ok', 2),
  failed: batchRow('bad', 3, { prompt: '=1+1 a cat', seed: 7 }),
  cancelled: batchRow('stop', 4),
  unknown: batchRow('lost', 5, { num_images: 2 }),
  notRun: batchRow('late', 6),
  inFlight: batchRow('busy', 7),
  notStarted: batchRow('new', 8),
  unsafe: batchRow('unsafe', 9),
  flaky: batchRow('flaky', 10),
  unsaved: batchRow('unsaved', 11),
  quit: batchRow('quit', 12),
  odd: batchRow('odd', 13),
};

const image = { url: 'https://files.example/ok.png', path: 'b/ok-1.png', sha256: 'ab'.repeat(32), bytes: 1234 };

const ALL: ResultRow[] = [
  done(rows.succeeded, {
    state: 'succeeded',
    keys: [{ attempt: 1, idempotencyKey: 'ib.b.ok.a1', outcome: 'succeeded', creationId: 'cr_ok', chargedUsd: 0.04 }],
    creationIds: ['cr_ok'],
    images: [image],
    chargedUsd: 0.04,
    netUsd: 0.04,
    resubmittable: false,
  }),
  done(rows.failed, {
    state: 'failed',
    keys: [{ attempt: 1, idempotencyKey: 'ib.b.bad.a1', outcome: 'rejected', error: 'prompt blocked' }],
    error: '-prompt blocked',
    resubmittable: true,
  }),
  done(rows.cancelled, {
    state: 'cancelled',
    keys: [
      { attempt: 1, idempotencyKey: 'ib.b.stop.a1', outcome: 'accepted', creationId: 'cr_stop', chargedUsd: 0.04 },
    ],
    creationIds: ['cr_stop'],
    chargedUsd: 0.04,
    netUsd: 0.04,
    error: 'cancelled while its creation was in flight',
    resubmittable: false,
  }),
  done(rows.unknown, {
    state: 'unknown',
    keys: [
      {
        attempt: 1,
        idempotencyKey: 'ib.b.lost.a1',
        outcome: 'refunded',
        chargedUsd: 0.08,
        refundedUsd: 0.08,
        error: '503 unavailable',
      },
      { attempt: 2, idempotencyKey: 'ib.b.lost.a2', outcome: 'unknown', error: 'no response' },
    ],
    chargedUsd: 0.08,
    refundedUsd: 0.08,
    netUsd: 0,
    error: 'no response',
    resubmittable: false,
  }),
  done(rows.notRun, { state: 'not_run', error: 'deadline passed', resubmittable: true }),
  { row: rows.inFlight, state: 'in_flight' },
  { row: rows.notStarted, state: 'not_started' },
  done(rows.unsafe, {
    state: 'failed',
    keys: [
      {
        attempt: 1,
        idempotencyKey: 'ib.b.unsafe.a1',
        outcome: 'failed',
        creationId: 'cr_unsafe',
        chargedUsd: 0.04,
        refundedUsd: 0.04,
        error: FailureMessage.SafetyFilter,
      },
    ],
    creationIds: ['cr_unsafe'],
    chargedUsd: 0.04,
    refundedUsd: 0.04,
    error: FailureMessage.SafetyFilter,
    resubmittable: false,
  }),
  done(rows.flaky, {
    state: 'failed',
    keys: [1, 2, 3].map((attempt) => ({
      attempt,
      idempotencyKey: `ib.b.flaky.a${attempt}`,
      outcome: 'failed' as const,
      error: FailureMessage.Failed,
    })),
    error: `${FailureMessage.Failed} (gave up after 3 attempts)`,
    resubmittable: true,
  }),
  done(rows.unsaved, {
    state: 'images_unsaved',
    keys: [
      { attempt: 1, idempotencyKey: 'ib.b.unsaved.a1', outcome: 'succeeded', creationId: 'cr_u', chargedUsd: 0.04 },
    ],
    creationIds: ['cr_u'],
    chargedUsd: 0.04,
    netUsd: 0.04,
    error: 'creation cr_u succeeded, but its images were not saved: 404',
    resubmittable: false,
  }),
  done(rows.quit, {
    state: 'cancelled',
    keys: [{ attempt: 1, idempotencyKey: 'ib.b.quit.a1', outcome: 'refunded', chargedUsd: 0.04, refundedUsd: 0.04 }],
    chargedUsd: 0.04,
    refundedUsd: 0.04,
    error: 'cancelled',
    resubmittable: true,
  }),
  // Should not happen (a failed row holds no money), but it must never be lost nor submitted again.
  done(rows.odd, {
    state: 'failed',
    keys: [{ attempt: 1, idempotencyKey: 'ib.b.odd.a1', outcome: 'accepted', creationId: 'cr_odd' }],
    creationIds: ['cr_odd'],
    error: 'broken',
    resubmittable: false,
  }),
];

const readCsv = async (file: string) => parse<Record<string, string>>(await readFile(file, 'utf8'), { columns: true });
const readJsonl = async (file: string) =>
  (await readFile(file, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('writeResults: one record per row', () => {
  it('results.jsonl carries the whole record, money null when unknown (not 0)', async () => {
    const written = await writeResults(path.join(dir, 'jsonl'), BATCH, ALL);
    expect([written.rows, written.errorRows, written.unresolvedRows]).toEqual([12, 6, 4]);
    const lines = await readJsonl(written.resultsJsonl);
    expect(lines.map((l) => [l.row_id, l.state])).toEqual(ALL.map((r) => [r.row.rowId, r.state]));
    expect(lines[0]).toEqual({
      row_id: 'ok',
      line: 2,
      state: 'succeeded',
      prompt: 'prompt of ok',
      model: 'flux-dev',
      images: [{ path: 'b/ok-1.png', sha256: 'ab'.repeat(32), bytes: 1234, url: 'https://files.example/ok.png' }],
      images_asked: 1,
      images_short: 0,
      keys: [
        {
          attempt: 1,
          idempotency_key: 'ib.b.ok.a1',
          outcome: 'succeeded',
          creation_id: 'cr_ok',
          charged_usd: 0.04,
          refunded_usd: null,
          price_source: null,
          error: null,
        },
      ],
      creation_ids: ['cr_ok'],
      charged_usd: 0.04,
      refunded_usd: 0,
      net_usd: 0.04,
      error: null,
      resubmittable: false,
    });
    expect(lines[3]).toMatchObject({
      state: 'unknown',
      keys: [
        { attempt: 1, outcome: 'refunded', creation_id: null, charged_usd: 0.08, refunded_usd: 0.08 },
        { attempt: 2, idempotency_key: 'ib.b.lost.a2', outcome: 'unknown', charged_usd: null, error: 'no response' },
      ],
      net_usd: 0,
      resubmittable: false,
    });
    expect(lines[4]).toMatchObject({ state: 'not_run', keys: [], charged_usd: 0, net_usd: 0, resubmittable: true });
    const money = (l: Record<string, unknown>) => [l.charged_usd, l.refunded_usd, l.net_usd];
    expect(lines[5]).toMatchObject({ state: 'in_flight', keys: [], creation_ids: [], error: null });
    expect([money(lines[5]!), lines[5]!.resubmittable]).toEqual([[null, null, null], null]);
    expect(lines[6]).toMatchObject({ state: 'not_started', keys: [], creation_ids: [], error: null });
    expect([money(lines[6]!), lines[6]!.resubmittable]).toEqual([[null, null, null], true]);
  });

  it('a succeeded row that saved fewer images than num_images asked says how many are missing', async () => {
    const short = batchRow('short', 14, { num_images: 3 });
    const inline = {
      url: 'data:image/png;base64 (1234 bytes) at data[0].b64_json',
      source: 'data[0].b64_json',
      path: 'b/short-0.png',
      sha256: 'cd'.repeat(32),
      bytes: 1234,
    };
    const rows: ResultRow[] = [
      ...ALL,
      done(short, {
        state: 'succeeded',
        keys: [{ attempt: 1, idempotencyKey: 'ib.b.short.a1', outcome: 'succeeded', creationId: 'cr_s' }],
        creationIds: ['cr_s'],
        images: [inline],
        resubmittable: false,
      }),
    ];
    const written = await writeResults(path.join(dir, 'short'), BATCH, rows);
    expect(written.imagesShortRows).toBe(1);
    const lines = await readJsonl(written.resultsJsonl);
    expect(lines.at(-1)).toMatchObject({
      state: 'succeeded',
      images: [{ path: 'b/short-0.png', url: inline.url, source: 'data[0].b64_json' }],
      images_asked: 3,
      images_short: 2,
    });
    // Not short: all came. Not succeeded: nothing was to be saved, so nothing is short (null, an empty cell).
    expect(lines.map((l) => [l.row_id, l.images_short])).toEqual([
      ['ok', 0],
      ...['bad', 'stop', 'lost', 'late', 'busy', 'new', 'unsafe', 'flaky', 'unsaved', 'quit', 'odd'].map((id) => [
        id,
        null,
      ]),
      ['short', 2],
    ]);
    expect(lines[3]).toMatchObject({ row_id: 'lost', images_asked: 2 });
    const csv = await readCsv(written.resultsCsv);
    expect(csv.map((r) => r.images_short)).toEqual(['0', ...Array<string>(11).fill(''), '2']);
    // The column is results.csv's own: errors.csv and unresolved.csv keep their columns, so they still run again.
    expect(await readFile(written.errorsCsv, 'utf8')).not.toContain('images_short');
    expect(await readFile(written.unresolvedCsv, 'utf8')).not.toContain('images_short');
  });

  it('results.csv has a state, the keys with their outcomes, and empty money when unknown', async () => {
    const written = await writeResults(path.join(dir, 'csv'), BATCH, ALL);
    const text = await readFile(written.resultsCsv, 'utf8');
    expect(text.split('\n')[0]).toBe(
      'row_id,line,state,prompt,model,images,sha256,images_short,error,resubmittable,idempotency_keys,key_outcomes,' +
        'creation_ids,charged_usd,refunded_usd,net_usd,price_known',
    );
    const csv = await readCsv(written.resultsCsv);
    expect(csv.map((r) => [r.row_id, r.state, r.resubmittable])).toEqual([
      ['ok', 'succeeded', 'false'],
      ['bad', 'failed', 'true'],
      ['stop', 'cancelled', 'false'],
      ['lost', 'unknown', 'false'],
      ['late', 'not_run', 'true'],
      ['busy', 'in_flight', ''],
      ['new', 'not_started', 'true'],
      ['unsafe', 'failed', 'false'],
      ['flaky', 'failed', 'true'],
      ['unsaved', 'images_unsaved', 'false'],
      ['quit', 'cancelled', 'true'],
      ['odd', 'failed', 'false'],
    ]);
    expect(csv[0]).toMatchObject({
      line: '2',
      images: 'b/ok-1.png',
      sha256: 'ab'.repeat(32),
      images_short: '0',
      idempotency_keys: 'ib.b.ok.a1',
      key_outcomes: 'succeeded',
      creation_ids: 'cr_ok',
      charged_usd: '0.0400',
      refunded_usd: '0.0000',
      net_usd: '0.0400',
      price_known: 'true',
    });
    // Formula defusing stays on text cells.
    expect([csv[1]!.prompt, csv[1]!.error]).toEqual(["'=1+1 a cat", "'-prompt blocked"]);
    expect(csv[3]).toMatchObject({
      idempotency_keys: 'ib.b.lost.a1 ib.b.lost.a2',
      key_outcomes: 'refunded unknown',
      charged_usd: '0.0800',
      refunded_usd: '0.0800',
      net_usd: '0.0000',
    });
    for (const r of csv.slice(5, 7)) {
      // No record yet: nothing said, not even whether the price is known.
      expect([r.idempotency_keys, r.key_outcomes, r.charged_usd, r.refunded_usd, r.net_usd, r.price_known]).toEqual([
        '',
        '',
        '',
        '',
        '',
        '',
      ]);
    }
  });

  it('errors.csv: only the rows safe to submit again, batch columns first, then the record with its advice', async () => {
    const written = await writeResults(path.join(dir, 'errors'), BATCH, ALL);
    const text = await readFile(written.errorsCsv, 'utf8');
    expect(text.split('\n')[0]).toBe(
      'id,prompt,model,seed,state,advice,resubmittable,error,idempotency_keys,key_outcomes,creation_ids,' +
        'charged_usd,refunded_usd,net_usd,price_known,batch_id',
    );
    const csv = await readCsv(written.errorsCsv);
    expect(csv.map((r) => [r.id, r.state, r.advice, r.resubmittable])).toEqual([
      ['bad', 'failed', 'fix_row', 'true'],
      ['late', 'not_run', 'submit_again', 'true'],
      ['new', 'not_started', 'submit_again', 'true'],
      ['unsafe', 'failed', 'revise_prompt', 'false'],
      ['flaky', 'failed', 'submit_again', 'true'],
      ['quit', 'cancelled', 'submit_again', 'true'],
    ]);
    // Each row names its batch: `run` refuses the file while that batch is open.
    expect(new Set(csv.map((r) => r.batch_id))).toEqual(new Set([BATCH]));
    // A batch still open starts its rows not started yet itself: they are not offered.
    const open = await writeResults(path.join(dir, 'errors-open'), BATCH, ALL, { open: true });
    expect(open.open).toBe(true);
    expect((await readCsv(open.errorsCsv)).map((r) => r.id)).toEqual(['bad', 'late', 'unsafe', 'flaky', 'quit']);
    // The prompt goes back to the service as it was; the record's own text is defused.
    expect(csv[0]).toMatchObject({ prompt: '=1+1 a cat', model: 'flux-dev', seed: '7', error: "'-prompt blocked" });
    expect(csv[5]).toMatchObject({
      idempotency_keys: 'ib.b.quit.a1',
      key_outcomes: 'refunded',
      charged_usd: '0.0400',
      refunded_usd: '0.0400',
      net_usd: '0.0000',
    });
    expect([csv[2]!.charged_usd, csv[2]!.refunded_usd, csv[2]!.net_usd]).toEqual(['', '', '']);
    expect(written.errorRows).toBe(6);
    expect(written.errorAdvice).toEqual({ submit_again: 4, revise_prompt: 1, fix_row: 1 });
  });

  it('unresolved.csv: every row that may have been paid, with its keys, money and the command that resolves it', async () => {
    const written = await writeResults(path.join(dir, 'unresolved'), BATCH, ALL);
    expect(written.unresolvedCsv).toBe(path.join(dir, 'unresolved', 'unresolved.csv'));
    const text = await readFile(written.unresolvedCsv, 'utf8');
    expect(text.split('\n')[0]).toBe(
      'id,line,state,prompt,model,idempotency_keys,key_outcomes,creation_ids,charged_usd,refunded_usd,net_usd,' +
        'price_known,error,next_step',
    );
    const csv = await readCsv(written.unresolvedCsv);
    expect(csv.map((r) => [r.id, r.line, r.state, r.key_outcomes])).toEqual([
      ['stop', '4', 'cancelled', 'accepted'],
      ['lost', '5', 'unknown', 'refunded unknown'],
      ['unsaved', '11', 'images_unsaved', 'succeeded'],
      ['odd', '13', 'failed', 'accepted'],
    ]);
    expect(csv[1]).toMatchObject({
      prompt: 'prompt of lost',
      model: 'flux-dev',
      idempotency_keys: 'ib.b.lost.a1 ib.b.lost.a2',
      creation_ids: '',
      charged_usd: '0.0800',
      refunded_usd: '0.0800',
      net_usd: '0.0000',
      error: 'no response',
    });
    expect(csv[2]).toMatchObject({ creation_ids: 'cr_u', charged_usd: '0.0400', net_usd: '0.0400' });
    for (const r of csv) expect(r.next_step).toBe(`imagebatch reconcile ${BATCH}`);
    expect(written.unresolvedRows).toBe(4);
    // A row served by another batch's request whose outcome is unknown: that batch's reconcile resolves it.
    const served = done(rows.succeeded, {
      state: 'unknown',
      keys: [],
      reusedFrom: { batchId: 'earlier', rowId: 'r', idempotencyKey: 'ib/earlier/r/a1' },
      error: 'the same request was sent by batch earlier, and its outcome is not known',
    });
    const reused = await writeResults(path.join(dir, 'unresolved-reused'), BATCH, [served]);
    expect((await readCsv(reused.unresolvedCsv)).map((r) => r.next_step)).toEqual(['imagebatch reconcile earlier']);
    // errors.csv and unresolved.csv never share a row, and between them hold every row not succeeded nor in flight.
    const errors = (await readCsv(written.errorsCsv)).map((r) => r.id);
    expect(errors.filter((id) => csv.some((r) => r.id === id))).toEqual([]);
    const expected = ALL.filter((r) => r.state !== 'succeeded' && r.state !== 'in_flight').map((r) => r.row.rowId);
    expect([...errors, ...csv.map((r) => r.id!)].sort()).toEqual(expected.sort());
  });

  it('errors.csv runs again as it is: every row is accepted, the revised and the rejected ones too', async () => {
    const written = await writeResults(path.join(dir, 'rerun'), BATCH, ALL);
    const report = await validateBatchFile(written.errorsCsv);
    expect(report.problems).toEqual([]);
    expect([report.ok, report.rows, report.validRows]).toEqual([true, 6, 6]);
    const page = await readBatchPage(written.errorsCsv, undefined);
    expect(page.rows.map((r) => [r.rowId, r.request])).toEqual([
      ['bad', { prompt: '=1+1 a cat', model: 'flux-dev', seed: 7 }],
      ['late', { prompt: 'prompt of late', model: 'flux-dev' }],
      ['new', { prompt: 'prompt of new', model: 'flux-dev' }],
      ['unsafe', { prompt: 'prompt of unsafe', model: 'flux-dev' }],
      ['flaky', { prompt: 'prompt of flaky', model: 'flux-dev' }],
      ['quit', { prompt: 'prompt of quit', model: 'flux-dev' }],
    ]);
  });

  const PAID = /may have been paid: resolve it with imagebatch reconcile, do not submit it again/;

  it('unresolved.csv fed to the batch reader is refused, each of its rows named as maybe paid', async () => {
    const written = await writeResults(path.join(dir, 'feed-unresolved'), BATCH, ALL);
    const report = await validateBatchFile(written.unresolvedCsv);
    expect([report.ok, report.validRows, report.invalidRows]).toEqual([false, 0, 4]);
    const paid = report.problems.filter((p) => PAID.test(p.message));
    expect(paid.map((p) => [p.line, p.rowId])).toEqual([
      [2, 'stop'],
      [3, 'lost'],
      [4, 'unsaved'],
      [5, 'odd'],
    ]);
    const page = await readBatchPage(written.unresolvedCsv, undefined);
    expect(page.rows).toEqual([]);
  });

  it('results.csv fed to the batch reader is refused, each row that may have been paid named as such', async () => {
    const written = await writeResults(path.join(dir, 'feed-results'), BATCH, ALL);
    const report = await validateBatchFile(written.resultsCsv);
    expect(report.ok).toBe(false);
    // results.csv names its rows by line (row_id is not a batch-file column): ok, stop, lost, busy, unsaved, odd.
    const paid = report.problems.filter((p) => PAID.test(p.message));
    expect(paid.map((p) => p.line)).toEqual([2, 4, 5, 7, 11, 13]);
    expect(paid.map((p) => p.message.match(/state (\w+)/)![1])).toEqual([
      'succeeded',
      'cancelled',
      'unknown',
      'in_flight',
      'images_unsaved',
      'failed',
    ]);
  });
});

describe('adviceFor: what to do with a row of errors.csv, from its record', () => {
  const key = (outcome: KeyOutcome, error?: string): Pick<KeyRecord, 'outcome' | 'error'> => ({
    outcome,
    ...(error === undefined ? {} : { error }),
  });

  it('submit_again: refunded or retryable failures past the limit, a row that failed before any key', () => {
    expect(adviceFor('failed', [key('refunded'), key('refunded'), key('refunded')])).toBe('submit_again');
    expect(adviceFor('failed', [key('failed', FailureMessage.TimedOut), key('failed', FailureMessage.NoImage)])).toBe(
      'submit_again',
    );
    expect(adviceFor('failed', [key('declined'), key('failed', FailureMessage.Failed)])).toBe('submit_again');
    expect(adviceFor('failed', [])).toBe('submit_again');
  });

  it('submit_again: cancelled rows with nothing held, rows never run or never started', () => {
    expect(adviceFor('cancelled', [])).toBe('submit_again');
    expect(adviceFor('cancelled', [key('refunded')])).toBe('submit_again');
    expect(adviceFor('not_run', [])).toBe('submit_again');
    expect(adviceFor('not_started', [])).toBe('submit_again');
  });

  it('revise_prompt: the safety filter (the failure string that is not retryable), also after a refunded key', () => {
    expect(adviceFor('failed', [key('failed', FailureMessage.SafetyFilter)])).toBe('revise_prompt');
    expect(adviceFor('failed', [key('refunded'), key('failed', FailureMessage.SafetyFilter)])).toBe('revise_prompt');
    // A retryable failure before it does not change what ended the row.
    expect(
      adviceFor('failed', [key('failed', FailureMessage.Failed), key('failed', FailureMessage.SafetyFilter)]),
    ).toBe('revise_prompt');
  });

  it('fix_row: a 400 rejection or an unknown model (key outcome rejected)', () => {
    expect(adviceFor('failed', [key('rejected', 'model "flux-pro" is not available to this account')])).toBe('fix_row');
    expect(adviceFor('failed', [key('refunded'), key('rejected', 'width: must be a multiple of 64')])).toBe('fix_row');
  });

  it("none for a row that is not errors.csv's: succeeded, in flight, or any key that may hold money", () => {
    expect(adviceFor('succeeded', [key('succeeded')])).toBeUndefined();
    expect(adviceFor('in_flight', [])).toBeUndefined();
    expect(adviceFor('unknown', [key('refunded')])).toBeUndefined();
    expect(adviceFor('images_unsaved', [key('succeeded')])).toBeUndefined();
    for (const outcome of ['submitting', 'accepted', 'succeeded', 'unknown', 'lost', 'timed_out'] as const) {
      expect(adviceFor('cancelled', [key(outcome)]), outcome).toBeUndefined();
      expect(adviceFor('failed', [key('refunded'), key(outcome)]), outcome).toBeUndefined();
    }
  });
});

describe('isUnresolved: rows that may have been paid, for unresolved.csv', () => {
  const keys = (...outcomes: KeyOutcome[]) => outcomes.map((outcome) => ({ outcome }));

  it('unknown and images_unsaved rows, and any row with a key that may hold money', () => {
    expect(isUnresolved('unknown', keys('refunded', 'unknown'))).toBe(true);
    expect(isUnresolved('unknown', [])).toBe(true);
    expect(isUnresolved('images_unsaved', keys('succeeded'))).toBe(true);
    for (const outcome of ['submitting', 'accepted', 'succeeded', 'unknown', 'lost', 'timed_out'] as const) {
      expect(isUnresolved('cancelled', keys(outcome)), outcome).toBe(true);
      expect(isUnresolved('failed', keys('refunded', outcome)), outcome).toBe(true);
      expect(isUnresolved('not_run', keys(outcome)), outcome).toBe(true);
    }
  });

  it('a succeeded row only when a key besides its success has no known outcome (never lose it)', () => {
    expect(isUnresolved('succeeded', keys('succeeded'))).toBe(false);
    expect(isUnresolved('succeeded', keys('refunded', 'failed', 'succeeded'))).toBe(false);
    for (const outcome of ['submitting', 'accepted', 'unknown', 'lost', 'timed_out'] as const) {
      expect(isUnresolved('succeeded', keys(outcome, 'succeeded')), outcome).toBe(true);
    }
  });

  it('never a reused row: the earlier request that served it was paid, and its images are here', () => {
    expect(isUnresolved('reused', [])).toBe(false);
    expect(isUnresolved('reused', keys('refunded'))).toBe(false);
    expect(adviceFor('reused', [])).toBeUndefined();
  });

  it('never a row safe to submit again, nor one in flight', () => {
    expect(isUnresolved('failed', keys('rejected'))).toBe(false);
    expect(isUnresolved('failed', keys('refunded', 'declined', 'failed'))).toBe(false);
    expect(isUnresolved('cancelled', [])).toBe(false);
    expect(isUnresolved('not_run', [])).toBe(false);
    expect(isUnresolved('not_started', [])).toBe(false);
    expect(isUnresolved('in_flight', [])).toBe(false);
  });
});

describe('collectResults: the state comes from the record', () => {
  type Fake = { status: string; result?: unknown; history?: unknown };
  const converter = {
    payloadConverter: defaultPayloadConverter,
    failureConverter: defaultFailureConverter,
    payloadCodecs: [],
  };
  const payloads = (value: unknown) => ({ payloads: [defaultPayloadConverter.toPayload(value)] });

  function fakeClient(workflows: Record<string, Fake>): Client {
    const getHandle = (workflowId: string) => {
      const wf = workflows[workflowId];
      const found = () => {
        if (!wf) throw new WorkflowNotFoundError('workflow not found', workflowId, undefined);
        return wf;
      };
      return {
        describe: async () => ({ status: { name: found().status } }),
        result: async () => found().result,
        fetchHistory: async () => found().history,
      };
    };
    return { workflow: { getHandle }, options: { loadedDataConverter: converter } } as unknown as Client;
  }

  it('not found, running, completed, cancelled and terminated rows', async () => {
    const file = path.join(dir, 'collect.csv');
    await writeFile(file, 'id,prompt,model\nok,a,m\nbusy,b,m\nnew,c,m\nstop,d,m\nkilled,e,m\n');
    const id = (rowId: string) => promptWorkflowId(BATCH, rowId);
    const ok = record(batchRow('ok', 2), { state: 'succeeded', chargedUsd: 0.04, netUsd: 0.04 });
    const stopped = record(batchRow('stop', 5), {
      state: 'cancelled',
      keys: [{ attempt: 1, idempotencyKey: 'ib.b.stop.a1', outcome: 'unknown' }],
      resubmittable: false,
    });
    const killedInput = { batchId: BATCH, rowId: 'killed', line: 6, request: { prompt: 'e', model: 'm' }, outDir: 'o' };
    const client = fakeClient({
      [id('ok')]: { status: 'COMPLETED', result: ok },
      [id('busy')]: { status: 'RUNNING', history: { events: [] } },
      [id('stop')]: { status: 'COMPLETED', result: stopped },
      [id('killed')]: {
        status: 'TERMINATED',
        history: {
          events: [
            { workflowExecutionStartedEventAttributes: { input: payloads(killedInput) } },
            {
              activityTaskScheduledEventAttributes: {
                activityType: { name: 'createImage' },
                input: payloads({ idempotencyKey: 'ib.b.killed.a1', progress: { creationId: 'cr_k' } }),
              },
            },
          ],
        },
      },
    });
    const collected = await collectResults({ client, batchId: BATCH, file, ledger: lazyTempLedger() });
    expect(collected.map((r) => [r.row.rowId, r.state])).toEqual([
      ['ok', 'succeeded'],
      ['busy', 'in_flight'],
      ['new', 'not_started'],
      ['stop', 'cancelled'],
      ['killed', 'cancelled'],
    ]);
    expect(collected[0]!.result).toEqual(ok);
    expect(collected[1]!.result).toBeUndefined();
    expect(collected[2]!.result).toBeUndefined();
    expect(collected[3]!.result).toEqual(stopped);
    expect(collected[4]!.result).toMatchObject({
      state: 'cancelled',
      keys: [{ idempotencyKey: 'ib.b.killed.a1', outcome: 'unknown', creationId: 'cr_k' }],
      creationIds: ['cr_k'],
      resubmittable: false,
    });
  });
});
