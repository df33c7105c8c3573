import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendLedger, fileFingerprint, ledgerFileOf, requestFingerprint, type NewLedgerEvent } from '../../src/ledger';
import { DevServer } from '../../src/temporal/dev-server';
import type { RowRecord } from '../../src/model';
import { baseEnv, cli, describeRun, ensureDistIsFresh, readCsv } from './helpers';
import { rowRecord } from '../helpers/records';

/**
 * `imagebatch results BATCH --out DIR` once Temporal has forgotten the batch (its retention passed, or the server
 * was reset; here a fresh dev server that never saw it): the batch file and default model come from the last
 * `batch` event of DIR's ledger, and every row's record from the ledger. Without --out it says what to give.
 */

let dir: string;
let server: DevServer;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-results-ledger-'));
  server = await DevServer.start({ uiPort: false });
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
  it('--out: every row from the ledger, with the batch file and model its batch event names', async () => {
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
        requestSha256: requestFingerprint(request),
      },
      { type: 'row', by: 'row', record: nope },
    ];
    await appendLedger(ledgerFileOf(out), events);

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

  it('without --out: one line saying to give the output folder (exit 1)', async () => {
    const args = ['results', 'never-seen'];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(1);
    expect(r.stderr.trim()).toBe(
      'imagebatch: batch never-seen is not known to Temporal (retention passed?): give its output folder with --out',
    );
  });

  it('--out with a ledger that does not know the batch: says so and names the ledger (exit 1)', async () => {
    const out = path.join(dir, 'empty-out');
    const args = ['results', 'never-seen', '--out', out];
    const r = await cli(args, env());
    expect(r.code, describeRun(args, r)).toBe(1);
    expect(r.stderr).toContain('never-seen');
    expect(r.stderr).toContain(ledgerFileOf(out));
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
