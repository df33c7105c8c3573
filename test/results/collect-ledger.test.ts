import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { defaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewLedgerEvent } from '../../src/ledger';
import { tempLedger, testPrint } from '../helpers/ledger';
import { collectResults } from '../../src/results';
import { promptWorkflowId, type RowRecord } from '../../src/model';
import { rowRecord } from '../helpers/records';

/**
 * collectResults with the output folder's ledger: Temporal says what still runs; otherwise the ledger's latest row
 * record wins (the row's own, or reconcile's, written later); then Temporal's record; then, for a row Temporal
 * does not know, the record rebuilt from the ledger's keys. A real ledger store (SQLite), a store of its own per
 * test; a fake Temporal client (the rows' workflows, or none).
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-collect-ledger-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const BATCH = 'lb';

type Fake = { status: string; result?: unknown };

function fakeClient(workflows: Record<string, Fake>): Client & { asked: string[] } {
  const asked: string[] = [];
  const getHandle = (workflowId: string) => {
    const found = () => {
      const wf = workflows[workflowId];
      if (!wf) throw new WorkflowNotFoundError('workflow not found', workflowId, undefined);
      return wf;
    };
    return {
      describe: async () => {
        asked.push(workflowId);
        return { status: { name: found().status } };
      },
      result: async () => found().result,
      fetchHistory: async () => ({ events: [] }),
    };
  };
  const options = {
    loadedDataConverter: {
      payloadConverter: defaultPayloadConverter,
      failureConverter: defaultFailureConverter,
      payloadCodecs: [],
    },
  };
  return { workflow: { getHandle }, options, asked } as unknown as Client & { asked: string[] };
}

function record(rowId: string, fields: Partial<RowRecord> & Pick<RowRecord, 'state'>): RowRecord {
  return rowRecord({ batchId: BATCH, rowId, ...fields });
}

const request = (rowId: string) => ({ prompt: `prompt ${rowId}`, model: 'flux-dev' });
const sending = (rowId: string, n = 1): NewLedgerEvent => ({
  type: 'sending',
  batchId: BATCH,
  rowId,
  idempotencyKey: `ib.${BATCH}.${rowId}.a${n}`,
  request: request(rowId),
  ...testPrint(request(rowId)),
});

const image = { url: 'https://files.example/k.png', path: 'lb/kept-1.png', sha256: 'cd'.repeat(32), bytes: 99 };

/** A batch file of the given row ids, with `prompt <id>` each, and its ledger folder. */
async function batch(name: string, ids: string[]): Promise<{ file: string; out: string }> {
  const file = path.join(dir, `${name}.csv`);
  await writeFile(file, `id,prompt\n${ids.map((id) => `${id},prompt ${id}`).join('\n')}\n`);
  return { file, out: path.join(dir, `out-${name}`) };
}

describe('collectResults with the ledger', () => {
  it('rows Temporal does not know come out of the ledger: their record, or one rebuilt from their keys', async () => {
    const { file } = await batch('only-ledger', ['done', 'kept', 'sent', 'refused', 'new']);
    const done = record('done', {
      state: 'succeeded',
      line: 2,
      keys: [
        { attempt: 1, idempotencyKey: 'ib.lb.done.a1', outcome: 'succeeded', creationId: 'cr_d', chargedUsd: 0.04 },
      ],
      creationIds: ['cr_d'],
      images: [{ ...image, path: 'lb/done-1.png' }],
      chargedUsd: 0.04,
      netUsd: 0.04,
    });
    const ledger = await tempLedger();
    await ledger.append([
      { type: 'batch', batchId: BATCH, file, fingerprint: { size: 1, sha256: 'ab'.repeat(32) } },
      sending('done'),
      { type: 'row', by: 'row', record: done },
      // Sent, accepted and ended with its images, but its workflow never wrote its record.
      sending('kept'),
      {
        type: 'accepted',
        batchId: BATCH,
        rowId: 'kept',
        idempotencyKey: 'ib.lb.kept.a1',
        creationId: 'cr_k',
        costUsd: 0.04,
      },
      {
        type: 'ended',
        batchId: BATCH,
        rowId: 'kept',
        idempotencyKey: 'ib.lb.kept.a1',
        outcome: 'succeeded',
        creationId: 'cr_k',
        images: [image],
      },
      // Sent, and nothing more is known: it may have been charged.
      sending('sent'),
      // Refused at submission: nothing held.
      sending('refused'),
      {
        type: 'ended',
        batchId: BATCH,
        rowId: 'refused',
        idempotencyKey: 'ib.lb.refused.a1',
        outcome: 'rejected',
        error: 'bad model',
      },
      // Another batch's row of the same id is not this batch's.
      { ...sending('new'), batchId: 'other' } as NewLedgerEvent,
    ]);
    const client = fakeClient({});
    const rows = await collectResults({ client, batchId: BATCH, file, defaultModel: 'flux-dev', ledger });

    expect(rows.map((r) => [r.row.rowId, r.state])).toEqual([
      ['done', 'succeeded'],
      ['kept', 'succeeded'],
      ['sent', 'unknown'],
      ['refused', 'failed'],
      ['new', 'not_started'],
    ]);
    expect(rows[0]!.result).toEqual(done);
    expect(rows[1]!.result).toMatchObject({
      state: 'succeeded',
      line: 3,
      prompt: 'prompt kept',
      model: 'flux-dev',
      keys: [{ idempotencyKey: 'ib.lb.kept.a1', outcome: 'succeeded', creationId: 'cr_k', chargedUsd: 0.04 }],
      images: [image],
      chargedUsd: 0.04,
    });
    expect(rows[2]!.result).toMatchObject({
      state: 'unknown',
      keys: [{ attempt: 1, idempotencyKey: 'ib.lb.sent.a1', outcome: 'unknown' }],
      resubmittable: false,
    });
    expect(rows[3]!.result).toMatchObject({ state: 'failed', resubmittable: true, error: 'bad model' });
    expect(rows[4]!.result).toBeUndefined();
    // Every row was still asked of Temporal.
    expect(client.asked.sort()).toEqual(
      ['done', 'kept', 'new', 'refused', 'sent'].map((id) => promptWorkflowId(BATCH, id)).sort(),
    );
  });

  it("the ledger's latest row record (reconcile's) wins over Temporal's; a running row is in flight", async () => {
    const { file } = await batch('reconciled', ['settled', 'busy', 'plain']);
    const unknown = record('settled', {
      state: 'unknown',
      keys: [{ attempt: 1, idempotencyKey: 'ib.lb.settled.a1', outcome: 'unknown' }],
      error: 'no answer',
    });
    const settled = record('settled', {
      state: 'failed',
      keys: [{ attempt: 1, idempotencyKey: 'ib.lb.settled.a1', outcome: 'rejected', error: 'bad request' }],
      error: 'bad request',
      resubmittable: true,
    });
    const plain = record('plain', { state: 'failed', error: 'temporal says so', resubmittable: true });
    const ledger = await tempLedger();
    await ledger.append([
      sending('settled'),
      { type: 'row', by: 'row', record: unknown },
      { type: 'row', by: 'reconcile', record: settled },
      sending('busy'),
      { type: 'row', by: 'reconcile', record: record('busy', { state: 'failed' }) },
    ]);
    const client = fakeClient({
      [promptWorkflowId(BATCH, 'settled')]: { status: 'COMPLETED', result: unknown },
      [promptWorkflowId(BATCH, 'busy')]: { status: 'RUNNING' },
      [promptWorkflowId(BATCH, 'plain')]: { status: 'COMPLETED', result: plain },
    });
    const rows = await collectResults({ client, batchId: BATCH, file, defaultModel: 'flux-dev', ledger });
    expect(rows.map((r) => [r.row.rowId, r.state])).toEqual([
      ['settled', 'failed'],
      ['busy', 'in_flight'],
      ['plain', 'failed'],
    ]);
    expect(rows[0]!.result).toEqual(settled);
    expect(rows[1]!.result).toBeUndefined();
    expect(rows[2]!.result).toEqual(plain);
  });
});
