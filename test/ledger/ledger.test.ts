import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LedgerView, appendLedger, readLedgerOnce, requestFingerprint, type NewLedgerEvent } from '../../src/ledger';

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
