import { mkdtemp, writeFile, appendFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { importJsonlLedger, type DecideInput, type LedgerStore } from '../../src/ledger';
import { KeyOutcome, RowState, type CreationRequest, type RowRecord } from '../../src/model';

/**
 * What every ledger store promises, whatever its database: run by store-sqlite.test.ts (unit) and
 * store-postgres.test.ts (integration, a PostgreSQL server of its own). `open` gives a fresh, empty store each call.
 */
export function storeContract(name: string, open: () => Promise<LedgerStore>): void {
  describe(`ledger store: ${name}`, () => {
    const opened: LedgerStore[] = [];
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((s) => s.close()));
    });
    const fresh = async () => {
      const store = await open();
      opened.push(store);
      return store;
    };

    const request: CreationRequest = { prompt: 'a red fox', model: 'flux-dev' };
    const decideInput = (batchId: string, rowId: string, fingerprint = 'fp-fox', attempt = 1): DecideInput => ({
      batchId,
      rowId,
      idempotencyKey: `ib/${batchId}/${rowId}/a${attempt}`,
      request,
      requestSha256: `body:${fingerprint}`,
      fingerprint,
      outDir: `/out/${batchId}`,
      reuse: true,
    });
    const ids = (batchId: string, rowId: string, attempt = 1) => ({
      batchId,
      rowId,
      idempotencyKey: `ib/${batchId}/${rowId}/a${attempt}`,
    });

    it('folds a key from its sending to its end, and lists it under its row with the row record', async () => {
      const store = await fresh();
      expect(await store.decide(decideInput('b1', 'r1'), 1_000)).toEqual({ kind: 'send' });
      await store.append([{ type: 'ambiguous', ...ids('b1', 'r1') }], 2_000);
      await store.append([{ type: 'accepted', ...ids('b1', 'r1'), creationId: 'c1', costUsd: 0.04 }], 3_000);
      const images = [
        { url: 'https://x/1.png', path: 'r1/c1-0.png', bytes: 10, sha256: 'ab', contentType: 'image/png' },
      ];
      await store.append([
        { type: 'ended', ...ids('b1', 'r1'), outcome: KeyOutcome.Succeeded, creationId: 'c1', images },
      ]);
      const key = await store.key('ib/b1/r1/a1');
      expect(key).toMatchObject({
        batchId: 'b1',
        rowId: 'r1',
        firstSentAtMs: 1_000,
        mayBeStoredSinceMs: 1_000,
        creationId: 'c1',
        costUsd: 0.04,
        requestSha256: 'body:fp-fox',
        fingerprint: 'fp-fox',
        outDir: '/out/b1',
        request,
        ended: { outcome: 'succeeded', images },
      });
      expect(key?.pendingSinceMs).toBeUndefined();
      const record = { batchId: 'b1', rowId: 'r1', state: RowState.Succeeded } as RowRecord;
      await store.append([{ type: 'row', by: 'row', record }]);
      const row = await store.row('b1', 'r1');
      expect(row?.keys.map((k) => k.idempotencyKey)).toEqual(['ib/b1/r1/a1']);
      expect(row?.record).toEqual(record);
      expect(row?.recordBy).toBe('row');
      expect(await store.row('b1', 'nope')).toBeUndefined();
      expect(await store.key('ib/b1/nope/a1')).toBeUndefined();
    });

    it('answers a key sent before as known, never as a new send', async () => {
      const store = await fresh();
      expect((await store.decide(decideInput('b1', 'r1'))).kind).toBe('send');
      const again = await store.decide(decideInput('b1', 'r1'));
      expect(again.kind).toBe('known');
    });

    it('serves a row of another batch with an earlier request of the same fingerprint, one row per earlier key', async () => {
      const store = await fresh();
      await store.decide(decideInput('first', 'r1'));
      await store.append([{ type: 'accepted', ...ids('first', 'r1'), creationId: 'c1' }]);
      const reused = await store.decide(decideInput('second', 'x'));
      expect(reused).toMatchObject({ kind: 'reuse', source: { idempotencyKey: 'ib/first/r1/a1', creationId: 'c1' } });
      // The binding holds: the same row asks again and gets the same key.
      expect(await store.decide(decideInput('second', 'x'))).toMatchObject({ kind: 'reuse' });
      expect((await store.row('second', 'x'))?.reusedFrom).toBe('ib/first/r1/a1');
      // The same request twice in the second batch is two requests: the earlier key serves only one of them.
      expect(await store.decide(decideInput('second', 'y'))).toEqual({ kind: 'send' });
      // A third batch is served by the first key that is not yet serving one of its own rows.
      expect(await store.decide(decideInput('third', 'a'))).toMatchObject({
        source: { idempotencyKey: 'ib/first/r1/a1' },
      });
      expect(await store.decide(decideInput('third', 'b'))).toMatchObject({
        source: { idempotencyKey: 'ib/second/y/a1' },
      });
      expect(await store.decide(decideInput('third', 'c'))).toEqual({ kind: 'send' });
    });

    it('never serves a row from its own batch, nor when it asks for new images', async () => {
      const store = await fresh();
      await store.decide(decideInput('b', 'r1'));
      expect(await store.decide(decideInput('b', 'r2'))).toEqual({ kind: 'send' });
      expect(await store.decide({ ...decideInput('c', 'r1'), reuse: false })).toEqual({ kind: 'send' });
      expect(await store.decide(decideInput('d', 'r1', 'another-fingerprint'))).toEqual({ kind: 'send' });
    });

    it('prefers a key that succeeded, skips keys that hold nothing, and unbinds a row from one that ended so', async () => {
      const store = await fresh();
      await store.decide(decideInput('a', 'refunded'));
      await store.append([{ type: 'ended', ...ids('a', 'refunded'), outcome: KeyOutcome.Refunded }]);
      await store.decide(decideInput('a', 'open'));
      await store.decide(decideInput('a', 'done'));
      await store.append([{ type: 'ended', ...ids('a', 'done'), outcome: KeyOutcome.Succeeded, creationId: 'c' }]);
      expect(await store.decide(decideInput('b', 'r'))).toMatchObject({ source: { idempotencyKey: 'ib/a/done/a1' } });
      const bound = await store.decide(decideInput('b', 's'));
      expect(bound).toMatchObject({ source: { idempotencyKey: 'ib/a/open/a1' } });
      await store.append([{ type: 'ended', ...ids('a', 'open'), outcome: KeyOutcome.Failed, retryable: true }]);
      await store.unbind('b', 's', 'ib/a/open/a1');
      expect(await store.decide(decideInput('b', 's'))).toEqual({ kind: 'send' });
    });

    it('pages through a batch in the order it first heard of its rows', async () => {
      const store = await fresh();
      for (const r of ['r3', 'r1', 'r2']) await store.decide(decideInput('b', r, `fp-${r}`));
      await store.decide(decideInput('other', 'r0', 'fp-other'));
      const first = await store.rows('b', 0, 2);
      expect(first.rows.map((r) => r.rowId)).toEqual(['r3', 'r1']);
      expect(first.done).toBe(false);
      const second = await store.rows('b', first.next, 2);
      expect(second.rows.map((r) => r.rowId)).toEqual(['r2']);
      expect(second.done).toBe(true);
      const some = await store.rowsOf('b', ['r2', 'r3', 'missing']);
      expect([...some.keys()].sort()).toEqual(['r2', 'r3']);
    });

    it('sums what was paid by batch, by day and by fingerprint, and pages through keys in the order first sent', async () => {
      const store = await fresh();
      const day1 = Date.UTC(2026, 10, 24, 23, 59);
      const day2 = Date.UTC(2026, 10, 25, 0, 1);
      await store.decide(decideInput('a', 'paid', 'fp-1'), day1);
      await store.append([{ type: 'accepted', ...ids('a', 'paid'), creationId: 'c1', costUsd: 0.04 }], day1);
      await store.decide(decideInput('a', 'nocost', 'fp-2'), day1);
      await store.append(
        [{ type: 'ended', ...ids('a', 'nocost'), outcome: KeyOutcome.Succeeded, creationId: 'c2' }],
        day1,
      );
      await store.decide(decideInput('a', 'refunded', 'fp-3'), day2);
      await store.append([{ type: 'ended', ...ids('a', 'refunded'), outcome: KeyOutcome.Refunded }], day2);
      await store.decide(decideInput('b', 'open', 'fp-4'), day2);
      await store.decide(decideInput('b', 'refused', 'fp-5'), day2);
      await store.append([{ type: 'ended', ...ids('b', 'refused'), outcome: KeyOutcome.Rejected }], day2);
      const byBatch = await store.summarize('batch');
      expect(byBatch).toEqual([
        { group: 'a', keys: 3, paid: 2, paidUsd: 0.04, paidCostUnknown: 1, open: 0, refunded: 1, refused: 0 },
        { group: 'b', keys: 2, paid: 0, paidUsd: 0, paidCostUnknown: 0, open: 1, refunded: 0, refused: 1 },
      ]);
      expect((await store.summarize('day')).map((r) => [r.group, r.keys, r.paid])).toEqual([
        ['2026-11-24', 2, 2],
        ['2026-11-25', 3, 0],
      ]);
      expect((await store.summarize('fingerprint', 'a')).map((r) => [r.group, r.paid])).toEqual([
        ['fp-1', 1],
        ['fp-2', 1],
        ['fp-3', 0],
      ]);
      const first = await store.keys(0, 3);
      expect(first.keys.map((k) => k.rowId)).toEqual(['paid', 'nocost', 'refunded']);
      expect(first.done).toBe(false);
      const rest = await store.keys(first.next, 3);
      expect(rest.keys.map((k) => k.rowId)).toEqual(['open', 'refused']);
      expect(rest.done).toBe(true);
      expect((await store.keys(0, 10, 'b')).keys.map((k) => k.rowId)).toEqual(['open', 'refused']);
    });

    it('says where its last key is: keys recorded later come after it, updates of earlier keys do not move it', async () => {
      const store = await fresh();
      expect(await store.lastKeyPosition()).toBe(0);
      await store.decide(decideInput('a', 'r1', 'fp-1'), 1000);
      const mark = await store.lastKeyPosition();
      expect(mark).toBeGreaterThan(0);
      await store.append([{ type: 'accepted', ...ids('a', 'r1'), creationId: 'c1', costUsd: 0.04 }], 2000);
      expect(await store.lastKeyPosition()).toBe(mark);
      expect((await store.keys(mark, 10)).keys).toEqual([]);
      await store.decide(decideInput('b', 'r2', 'fp-2'), 3000);
      expect((await store.keys(mark, 10, 'b')).keys.map((k) => k.rowId)).toEqual(['r2']);
      expect(await store.lastKeyPosition()).toBeGreaterThan(mark);
    });

    it('gives the latest charge of each model per image asked, and none where no cost was shown', async () => {
      const store = await fresh();
      const send = async (batchId: string, rowId: string, req: CreationRequest, at: number, cost?: number) => {
        const input = { ...decideInput(batchId, rowId, `fp-${batchId}-${rowId}`), request: req };
        await store.decide(input, at);
        await store.append([
          {
            type: 'accepted',
            ...ids(batchId, rowId),
            creationId: `c-${batchId}-${rowId}`,
            ...(cost ? { costUsd: cost } : {}),
          },
        ]);
      };
      await send('b1', 'r1', { prompt: 'a', model: 'flux-dev' }, 1_000, 0.01);
      await send('b2', 'r1', { prompt: 'b', model: 'flux-dev', num_images: 2 }, 3_000, 0.08);
      await send('b2', 'r2', { prompt: 'c', model: 'flux-dev' }, 2_000, 0.5);
      await send('b3', 'r1', { prompt: 'd', model: 'sdxl' }, 4_000);
      await send('b3', 'r2', { prompt: 'e', model: 'flux-pro' }, 5_000, 0.06);
      // A key sent, never answered: no charge seen.
      await store.decide({ ...decideInput('b4', 'r1', 'fp-b4'), request: { prompt: 'f', model: 'flux-pro' } }, 9_000);
      const seen = await store.chargesSeen(['flux-dev', 'sdxl', 'flux-pro', 'never']);
      expect([...seen.keys()].sort()).toEqual(['flux-dev', 'flux-pro']);
      expect(seen.get('flux-dev')).toEqual({
        model: 'flux-dev',
        perImageUsd: 0.04,
        atMs: 3_000,
        batchId: 'b2',
        rowId: 'r1',
      });
      expect(seen.get('flux-pro')).toMatchObject({ perImageUsd: 0.06, atMs: 5_000, batchId: 'b3' });
    });

    it('keeps the latest proof of a worker settings fingerprint, and none for other settings', async () => {
      const store = await fresh();
      expect(await store.serviceProof('settings-a')).toBeUndefined();
      await store.proveService('settings-a', { by: 'canary', batchId: 'b', rowId: 'r1', creationId: 'c1' }, 1000);
      await store.proveService('settings-a', { by: 'doctor', creationId: 'c2' }, 2000);
      expect(await store.serviceProof('settings-a')).toEqual({ by: 'doctor', creationId: 'c2', atMs: 2000 });
      expect(await store.serviceProof('settings-b')).toBeUndefined();
    });

    it('keeps a batch start and the options it asked with', async () => {
      const store = await fresh();
      const fingerprint = { size: 10, sha256: 'abc' };
      await store.append([
        { type: 'batch', batchId: 'b', file: '/f.csv', fingerprint, defaultModel: 'm', newImages: true },
      ]);
      expect(await store.batches('b')).toMatchObject([
        { file: '/f.csv', fingerprint, defaultModel: 'm', newImages: true },
      ]);
      expect(await store.batches('none')).toEqual([]);
    });

    it('decides once for two rows that ask for one request at the same moment, in two batches', async () => {
      const store = await fresh();
      const decisions = await Promise.all(
        Array.from({ length: 8 }, (_, i) => store.decide(decideInput(`batch-${i}`, 'r'))),
      );
      expect(decisions.filter((d) => d.kind === 'send')).toHaveLength(1);
      expect(decisions.filter((d) => d.kind === 'reuse')).toHaveLength(7);
    });

    it('imports a ledger.jsonl once, and later only what was appended to it', async () => {
      const store = await fresh();
      const dir = await mkdtemp(path.join(os.tmpdir(), 'ib-jsonl-'));
      const line = (e: object) => `\n${JSON.stringify({ v: 1, at: '2026-01-01T00:00:00.000Z', ...e })}\n`;
      const sending = { type: 'sending', ...ids('old', 'r1'), request, requestSha256: 'field-hash' };
      await writeFile(
        path.join(dir, 'ledger.jsonl'),
        line({ type: 'batch', batchId: 'old', file: '/f.csv', fingerprint: { size: 1, sha256: 'x' } }) +
          line(sending) +
          line({ type: 'accepted', ...ids('old', 'r1'), creationId: 'c1' }) +
          '{"torn',
      );
      const fingerprintOf = (r: CreationRequest) => ({
        requestSha256: `body:${r.prompt}`,
        fingerprint: `content:${r.prompt}`,
      });
      expect(await importJsonlLedger(store, dir, fingerprintOf)).toEqual({ events: 3, unreadable: 0 });
      expect(await importJsonlLedger(store, dir, fingerprintOf)).toEqual({ events: 0, unreadable: 0 });
      const key = await store.key('ib/old/r1/a1');
      expect(key).toMatchObject({
        creationId: 'c1',
        requestSha256: 'body:a red fox',
        fingerprint: 'content:a red fox',
        outDir: dir,
      });
      expect(key?.mayBeStoredSinceMs).toBe(Date.parse('2026-01-01T00:00:00.000Z'));
      // The torn line completed, and one more event: only they are taken in.
      await appendFile(
        path.join(dir, 'ledger.jsonl'),
        `"}\n${line({ type: 'ended', ...ids('old', 'r1'), outcome: 'succeeded' })}`,
      );
      expect(await importJsonlLedger(store, dir, fingerprintOf)).toEqual({ events: 1, unreadable: 1 });
      expect((await store.key('ib/old/r1/a1'))?.ended?.outcome).toBe('succeeded');
      // What an imported key paid serves a new batch asking the same thing.
      expect(await store.decide(decideInput('new', 'r1', 'content:a red fox'))).toMatchObject({
        kind: 'reuse',
      });
    });
  });
}
