import { appendFile, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  LedgerKeyIndex,
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

  it('makes its folder at the first append, and again when the folder was removed since', async () => {
    const nested = path.join(dir, 'out', 'ledger.jsonl');
    await appendLedger(nested, [sending('a')]);
    await rm(path.join(dir, 'out'), { recursive: true });
    await appendLedger(nested, [sending('b')]);
    const view = await readLedgerOnce(nested);
    expect(view.key('ib/b/b/a1')).toBeDefined();
    expect(view.key('ib/b/a/a1')).toBeUndefined();
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

  it.each([
    ['view', (f: string) => new LedgerView(f)],
    ['key index', (f: string) => new LedgerKeyIndex(f)],
  ])('a ledger replaced by a shorter file is read again from its start (the %s)', async (_name, make) => {
    const reader = make(file);
    await appendLedger(file, [sending('a'), sending('b')]);
    await reader.refresh();
    await writeFile(file, '');
    await appendLedger(file, [sending('c')]);
    await reader.refresh();
    expect(await reader.key('ib/b/c/a1')).toBeDefined();
    expect(await reader.key('ib/b/a/a1')).toBeUndefined();
  });
});

describe("the worker's key index", () => {
  /** Every kind of key event, around lines the index must step over by their bytes, not their characters. */
  async function writeHistory(): Promise<void> {
    const wide = { prompt: `un café ☕ ${'é'.repeat(20_000)}`, model: 'm' }; // a line over 16 KB, 2-3 bytes a char
    await appendLedger(file, [
      { type: 'batch', batchId: 'b', file: 'in.csv', fingerprint: { size: 1, sha256: 'x' } },
      { ...sending('w'), request: wide, requestSha256: requestFingerprint(wide) } as NewLedgerEvent,
      sending('r'),
      { type: 'ambiguous', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a1' },
    ]);
    await appendFile(file, '{"v":1,"at":"2026-01-01T00:00:00Z","type":"acc'); // torn by a crash
    await appendLedger(file, [sending('r')]); // the same key sent again
    await appendLedger(file, [
      { type: 'accepted', batchId: 'b', rowId: 'w', idempotencyKey: 'ib/b/w/a1', creationId: 'cr_w', costUsd: 0.04 },
      { type: 'accepted', batchId: 'b', rowId: 'r', idempotencyKey: 'ib/b/r/a1', creationId: 'cr_r' },
      { type: 'ended', batchId: 'b', rowId: 'x', idempotencyKey: 'ib/b/x/a1', outcome: 'failed' }, // never sent
      {
        type: 'ended',
        batchId: 'b',
        rowId: 'w',
        idempotencyKey: 'ib/b/w/a1',
        outcome: 'succeeded',
        creationId: 'cr_w',
        costUsd: 0.04,
        images: [{ url: 'https://img/w.png', path: 'images/w.png', sha256: 'ab', bytes: 3 }],
      },
    ]);
  }

  it('knows each key as the whole view does, read back from the lines of the file', async () => {
    await writeHistory();
    const view = await readLedgerOnce(file);
    const index = await new LedgerKeyIndex(file).refresh();
    for (const id of ['ib/b/w/a1', 'ib/b/r/a1']) expect(await index.key(id)).toEqual(view.key(id));
    expect((await index.key('ib/b/w/a1'))?.ended?.images?.[0]?.path).toBe('images/w.png');
    expect((await index.key('ib/b/r/a1'))?.mayBeStoredSinceMs).toBeDefined();
    expect(await index.key('ib/b/x/a1')).toBeUndefined();
    expect(await index.key('ib/b/never/a1')).toBeUndefined();
    // The torn line and the end of a key never sent, as the view counts them.
    expect(index.unreadableLines).toBe(2);
    expect(view.unreadableLines).toBe(2);
  });

  it('a ledger rewritten in place, at the same length, fails the lookup once and is then read again', async () => {
    await appendLedger(file, [sending('a')]);
    const index = await new LedgerKeyIndex(file).refresh();
    const { size } = await stat(file);
    await writeFile(file, '\n'.repeat(size)); // the key's line is gone; the file is as long as it was
    await expect(index.key('ib/b/a/a1')).rejects.toThrow(/changed under its index/);
    await index.refresh();
    expect(await index.key('ib/b/a/a1')).toBeUndefined();
  });

  it('keys whose hashes collide share a bucket, and each is still read as itself', async () => {
    await writeHistory();
    const view = await readLedgerOnce(file);
    const index = await new LedgerKeyIndex(file, () => 7).refresh(); // every key in one bucket
    for (const id of ['ib/b/w/a1', 'ib/b/r/a1']) expect(await index.key(id)).toEqual(view.key(id));
    // A key never sent, whose hash is that of keys sent: its lines are read, and none is its own.
    expect(await index.key('ib/b/x/a1')).toBeUndefined();
    expect(await index.key('ib/b/never/a1')).toBeUndefined();
  });

  it('refreshed at once by many activities, and as lines arrive a write at a time, reads each line once', async () => {
    const index = new LedgerKeyIndex(file);
    for (let round = 0; round < 20; round++) {
      await appendLedger(file, [sending(`r${round}`)]);
      await Promise.all(Array.from({ length: 8 }, () => index.refresh()));
    }
    // Half a line, then its end: the index takes it once it is whole.
    const line = `${JSON.stringify({ v: 1, at: new Date().toISOString(), ...sending('half') })}\n`;
    await appendFile(file, line.slice(0, 40));
    await index.refresh();
    expect(await index.key('ib/b/half/a1')).toBeUndefined();
    await appendFile(file, line.slice(40));
    await index.refresh();
    expect((await index.key('ib/b/half/a1'))?.request).toEqual(request);
    for (let round = 0; round < 20; round++) expect((await index.key(`ib/b/r${round}/a1`))?.rowId).toBe(`r${round}`);
    expect(index.unreadableLines).toBe(0);
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
