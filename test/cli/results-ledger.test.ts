import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileFingerprint, ledgerLocation, type NewLedgerEvent } from '../../src/ledger';
import { defaultLedger, testPrint, writeJsonlLedger } from '../helpers/ledger';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { RowRecord } from '../../src/model';
import { baseEnv, cli, describeRun, ensureDistIsFresh, readCsv } from './helpers';
import { rowRecord } from '../helpers/records';

/**
 * `imagebatch results BATCH` once Temporal has forgotten the batch (its retention passed, or the server was reset;
 * here a fresh dev server that never saw it): the batch file, output folder and default model come from the batch's
 * last start in the ledger store, and every row's record from the store. A batch of an earlier version kept its
 * ledger in its output folder: `--out DIR` takes DIR's ledger.jsonl into the store first.
 */

let dir: string;
let server: DevServer;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-results-ledger-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
});

afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const env = () => ({ env: baseEnv({ TEMPORAL_ADDRESS: server.address }) });
const BATCH = 'forgotten';

function record(rowId: string, line: number, fields: Partial<RowRecord> & Pick<RowRecord, 'state'>): RowRecord {
  return rowRecord({ batchId: BATCH, rowId, line, ...fields });
}

describe('results of a batch Temporal does not know', { timeout: 120_000 }, () => {
  it('--out, for a batch of an earlier version: its ledger.jsonl is imported, every row comes from it', async () => {
    const file = path.join(dir, 'prompts.csv');
    const out = path.join(dir, 'out');
    await writeFile(file, 'id,prompt\nok,prompt ok\nlost,prompt lost\nnope,prompt nope\nnew,prompt new\n');
    const request = { prompt: 'prompt lost', model: 'flux-dev' };
    const ok = record('ok', 2, {
      state: 'succeeded',
      keys: [{ attempt: 1, idempotencyKey: 'ib.forgotten.ok.a1', outcome: 'succeeded', creationId: 'cr_ok' }],
      creationIds: ['cr_ok'],
      images: [{ url: 'https://files.example/ok.png', path: 'forgotten/ok-1.png', sha256: 'ab'.repeat(32), bytes: 9 }],
      chargedUsd: 0.04,
      netUsd: 0.04,
    });
    const nope = record('nope', 4, {
      state: 'failed',
      keys: [{ attempt: 1, idempotencyKey: 'ib.forgotten.nope.a1', outcome: 'rejected', error: 'no such model' }],
      error: 'no such model',
      resubmittable: false,
    });
    const events: NewLedgerEvent[] = [
      { type: 'batch', batchId: BATCH, file, fingerprint: await fileFingerprint(file), defaultModel: 'flux-dev' },
      { type: 'row', by: 'row', record: ok },
      {
        type: 'sending',
        batchId: BATCH,
        rowId: 'lost',
        idempotencyKey: 'ib.forgotten.lost.a1',
        request,
        ...testPrint(request),
      },
      { type: 'row', by: 'row', record: nope },
    ];
    await writeJsonlLedger(out, events);

    const args = ['results', BATCH, '--out', out, '--json'];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ resultsCsv: path.join(out, 'results.csv'), rows: 4 });

    const csv = await readCsv(path.join(out, 'results.csv'));
    expect(csv.map((row) => [row.row_id, row.state, row.model])).toEqual([
      ['ok', 'succeeded', 'flux-dev'],
      ['lost', 'unknown', 'flux-dev'],
      ['nope', 'failed', 'flux-dev'],
      ['new', 'not_started', 'flux-dev'],
    ]);
    expect(csv[1]).toMatchObject({ idempotency_keys: 'ib.forgotten.lost.a1', resubmittable: 'false' });
    const jsonl = (await readFile(path.join(out, 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { row_id: string; creation_ids: string[]; charged_usd: number | null });
    expect(jsonl[0]).toMatchObject({ row_id: 'ok', creation_ids: ['cr_ok'], charged_usd: 0.04 });
  });

  it('without --out: the batch and its rows from the store alone, written to the folder it ran with', async () => {
    const file = path.join(dir, 'stored.csv');
    const out = path.join(dir, 'stored-out');
    await writeFile(file, 'id,prompt\nok,prompt ok\nnew,prompt new\n');
    const store = await defaultLedger();
    try {
      await store.append([
        {
          type: 'batch',
          batchId: 'stored',
          file,
          fingerprint: await fileFingerprint(file),
          outDir: out,
          defaultModel: 'flux-dev',
        },
        { type: 'row', by: 'row', record: rowRecord({ batchId: 'stored', rowId: 'ok', line: 2, state: 'succeeded' }) },
      ]);
    } finally {
      await store.close();
    }
    const args = ['results', 'stored', '--json'];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(0);
    const csv = await readCsv(path.join(out, 'results.csv'));
    expect(csv.map((row) => [row.row_id, row.state])).toEqual([
      ['ok', 'succeeded'],
      ['new', 'not_started'],
    ]);
  });

  it('a batch neither Temporal nor the store knows: one line naming the store and the setting (exit 1)', async () => {
    const args = ['results', 'never-seen'];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(1);
    expect(r.stderr).toContain('never-seen');
    expect(r.stderr).toContain(String((ledgerLocation(process.env) as { file: string }).file));
    expect(r.stderr).toContain('IMAGEBATCH_LEDGER');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
