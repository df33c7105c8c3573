import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { defaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BatchRow, readBatchPage, validateBatchFile } from '../../src/batch';
import { collectResults, type ResultRow, writeResults } from '../../src/results';
import { promptWorkflowId } from '../../src/workflows/keys';
import type { RowRecord } from '../../src/workflows/model';

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
  return {
    batchId: BATCH,
    rowId: row.rowId,
    line: row.line,
    prompt: row.request.prompt,
    model: row.request.model,
    keys: [],
    creationIds: [],
    images: [],
    chargedUsd: 0,
    refundedUsd: 0,
    netUsd: 0,
    resubmittable: false,
    ...fields,
  };
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
    expect([written.rows, written.errorRows]).toEqual([7, 5]);
    const lines = await readJsonl(written.resultsJsonl);
    expect(lines.map((l) => [l.row_id, l.state])).toEqual(ALL.map((r) => [r.row.rowId, r.state]));
    expect(lines[0]).toEqual({
      row_id: 'ok',
      line: 2,
      state: 'succeeded',
      prompt: 'prompt of ok',
      model: 'flux-dev',
      images: [{ path: 'b/ok-1.png', sha256: 'ab'.repeat(32), bytes: 1234, url: 'https://files.example/ok.png' }],
      keys: [
        {
          attempt: 1,
          idempotency_key: 'ib.b.ok.a1',
          outcome: 'succeeded',
          creation_id: 'cr_ok',
          charged_usd: 0.04,
          refunded_usd: null,
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

  it('results.csv has a state, the keys with their outcomes, and empty money when unknown', async () => {
    const written = await writeResults(path.join(dir, 'csv'), BATCH, ALL);
    const text = await readFile(written.resultsCsv, 'utf8');
    expect(text.split('\n')[0]).toBe(
      'row_id,line,state,prompt,model,images,sha256,error,resubmittable,idempotency_keys,key_outcomes,' +
        'creation_ids,charged_usd,refunded_usd,net_usd',
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
    ]);
    expect(csv[0]).toMatchObject({
      line: '2',
      images: 'b/ok-1.png',
      sha256: 'ab'.repeat(32),
      idempotency_keys: 'ib.b.ok.a1',
      key_outcomes: 'succeeded',
      creation_ids: 'cr_ok',
      charged_usd: '0.0400',
      refunded_usd: '0.0000',
      net_usd: '0.0400',
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
    for (const r of csv.slice(5)) {
      expect([r.idempotency_keys, r.key_outcomes, r.charged_usd, r.refunded_usd, r.net_usd]).toEqual([
        '',
        '',
        '',
        '',
        '',
      ]);
    }
  });

  it('errors.csv: every row neither succeeded nor in flight, batch columns first, then the record', async () => {
    const written = await writeResults(path.join(dir, 'errors'), BATCH, ALL);
    const text = await readFile(written.errorsCsv, 'utf8');
    expect(text.split('\n')[0]).toBe(
      'id,prompt,model,seed,num_images,state,resubmittable,error,idempotency_keys,key_outcomes,creation_ids,' +
        'charged_usd,refunded_usd,net_usd',
    );
    const csv = await readCsv(written.errorsCsv);
    expect(csv.map((r) => [r.id, r.state, r.resubmittable])).toEqual([
      ['bad', 'failed', 'true'],
      ['stop', 'cancelled', 'false'],
      ['lost', 'unknown', 'false'],
      ['late', 'not_run', 'true'],
      ['new', 'not_started', 'true'],
    ]);
    // The prompt goes back to the service as it was; the record's own text is defused.
    expect(csv[0]).toMatchObject({ prompt: '=1+1 a cat', model: 'flux-dev', seed: '7', error: "'-prompt blocked" });
    expect(csv[1]).toMatchObject({
      idempotency_keys: 'ib.b.stop.a1',
      key_outcomes: 'accepted',
      creation_ids: 'cr_stop',
      charged_usd: '0.0400',
      net_usd: '0.0400',
    });
    expect(csv[2]).toMatchObject({ num_images: '2', key_outcomes: 'refunded unknown' });
    expect([csv[4]!.charged_usd, csv[4]!.refunded_usd, csv[4]!.net_usd]).toEqual(['', '', '']);
  });

  it('errors.csv runs again: a resubmittable row is accepted, a cancelled row that may have paid is refused', async () => {
    const written = await writeResults(path.join(dir, 'rerun'), BATCH, ALL);
    const report = await validateBatchFile(written.errorsCsv);
    expect([report.rows, report.validRows, report.invalidRows]).toEqual([5, 3, 2]);
    expect(report.problems.map((p) => [p.line, p.field, p.rowId])).toEqual([
      [3, 'resubmittable', 'stop'],
      [4, 'resubmittable', 'lost'],
    ]);
    expect(report.problems[0]!.message).toMatch(/line 3 .*resubmittable=false.*pay twice/);
    const page = await readBatchPage(written.errorsCsv, undefined);
    expect(page.rows.map((r) => [r.rowId, r.request])).toEqual([
      ['bad', { prompt: '=1+1 a cat', model: 'flux-dev', seed: 7 }],
      ['late', { prompt: 'prompt of late', model: 'flux-dev' }],
      ['new', { prompt: 'prompt of new', model: 'flux-dev' }],
    ]);

    const failedOnly = await writeResults(path.join(dir, 'failed-only'), BATCH, [ALL[1]!]);
    const ok = await validateBatchFile(failedOnly.errorsCsv);
    expect([ok.ok, ok.validRows, ok.problems]).toEqual([true, 1, []]);
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
      [id('busy')]: { status: 'RUNNING' },
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
    const collected = await collectResults({ client, batchId: BATCH, file });
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
