import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  LedgerView,
  appendLedger,
  readLedgerOnce,
  recordAgainstLedger,
  requestFingerprint,
  type NewLedgerEvent,
} from '../../src/ledger';
import type { RowRecord } from '../../src/model';

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-ledger-'));
  file = path.join(dir, 'ledger.jsonl');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const request = { prompt: 'p', model: 'm' };
const sending = (rowId: string): NewLedgerEvent => ({
  type: 'sending',
  batchId: 'b',
  rowId,
  idempotencyKey: `ib/b/${rowId}/a1`,
  request,
  requestSha256: requestFingerprint(request),
});

describe('the ledger', () => {
  it('one view read by many activities at once reads each line once (seen: a view that read lines twice)', async () => {
    const view = new LedgerView(file);
    for (let round = 0; round < 20; round++) {
      await appendLedger(file, [sending(`r${round}`)]);
      // Parallel activities of one worker refresh the same view at the same time.
      await Promise.all(Array.from({ length: 8 }, () => view.refresh()));
    }
    expect(view.rows('b')).toHaveLength(20);
    expect(view.rows('b').every((r) => r.keys.length === 1)).toBe(true);
    expect(view.unreadableLines).toBe(0);
    await appendLedger(file, [sending('last')]);
    await view.refresh();
    expect(view.key('ib/b/last/a1')).toBeDefined();
  });

  it('a line torn by a crash spoils only itself: the next event, on a line of its own, is read', async () => {
    await appendLedger(file, [sending('a')]);
    await appendFile(file, '{"v":1,"at":"2026-01-01T00:00:00Z","type":"send'); // a crash mid-write
    await appendLedger(file, [sending('b')]);
    const view = await readLedgerOnce(file);
    expect(view.key('ib/b/a/a1')).toBeDefined();
    expect(view.key('ib/b/b/a1')).toBeDefined();
    expect(view.unreadableLines).toBe(1);
  });

  it('a ledger replaced by a shorter file is read again from its start', async () => {
    const view = new LedgerView(file);
    await appendLedger(file, [sending('a'), sending('b')]);
    await view.refresh();
    await writeFile(file, '');
    await appendLedger(file, [sending('c')]);
    await view.refresh();
    expect(view.key('ib/b/c/a1')).toBeDefined();
    expect(view.key('ib/b/a/a1')).toBeUndefined();
  });
});

describe('a record against the ledger', () => {
  it('a record that leaves out a key the ledger says may hold money gives way to the ledger', async () => {
    // A row run again with fewer attempts gave up after key 1 (refunded), while the ledger knows its key 2 succeeded.
    await appendLedger(file, [
      sending('r'),
      { type: 'ended', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a1', outcome: 'refunded', error: '503' },
      { ...sending('r'), idempotencyKey: 'ib/b/r/a2' } as NewLedgerEvent,
      { type: 'accepted', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a2', creationId: 'cr_2', costUsd: 0.04 },
    ]);
    const view = await readLedgerOnce(file);
    const known = view.row('b', 'r')!;
    const gaveUp: RowRecord = {
      batchId: 'b',
      rowId: 'r',
      state: 'failed',
      prompt: 'p',
      model: 'm',
      keys: [{ attempt: 1, idempotencyKey: 'ib/b/r/a1', outcome: 'refunded' }],
      creationIds: [],
      images: [],
      chargedUsd: 0,
      refundedUsd: 0,
      netUsd: 0,
      resubmittable: true,
    };
    const merged = recordAgainstLedger(gaveUp, known);
    expect(merged.state).toBe('unknown');
    expect(merged.resubmittable).toBe(false);
    expect(merged.keys.map((k) => [k.idempotencyKey, k.outcome])).toEqual([
      ['ib/b/r/a1', 'refunded'],
      ['ib/b/r/a2', 'accepted'],
    ]);
    // A record that lists every such key is kept as it is.
    const complete = {
      ...gaveUp,
      keys: [...gaveUp.keys, { attempt: 2, idempotencyKey: 'ib/b/r/a2', outcome: 'accepted' as const }],
    };
    expect(recordAgainstLedger(complete, known)).toBe(complete);
  });
});
