import { mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  adoptLedgerStore,
  knownStoresFile,
  LedgerReplacedError,
  openKnownLedgerStore,
  readKnownStores,
  rememberLedgerStore,
  storeReplaced,
  withUse,
  type KnownStores,
  type LedgerStore,
} from '../../src/ledger';
import { ErrorCode } from '../../src/model';

/**
 * A store once used is never silently replaced (issue 43, point 1): the record of the stores this user used, kept
 * in the config folder, stops a missing, emptied or other store where one held keys, and a default store that moved
 * with the data folder. `imagebatch ledger new` is the one way to start afresh.
 */
const used = { location: '/d/ledger.sqlite', id: 'store-a', keys: 12, lastUsedMs: Date.UTC(2026, 10, 1) };
const record: KnownStores = { defaultLocation: used.location, stores: [used] };

describe('storeReplaced: the rules', () => {
  it('the store known at a place must be there, not empty, and the same one', () => {
    expect(storeReplaced(record, used.location, true, { kind: 'missing' })).toEqual({
      kind: 'missing',
      expected: used,
    });
    expect(storeReplaced(record, used.location, false, { kind: 'empty-file' })?.kind).toBe('empty-file');
    expect(storeReplaced(record, used.location, true, { kind: 'opened', id: 'store-b', keys: 0 })).toEqual({
      kind: 'other',
      expected: used,
      found: { id: 'store-b', keys: 0 },
    });
    expect(storeReplaced(record, used.location, true, { kind: 'opened', id: 'store-a', keys: 30 })).toBeUndefined();
    // An older copy of the same store (put back from a backup) is the same store.
    expect(storeReplaced(record, used.location, true, { kind: 'opened', id: 'store-a', keys: 3 })).toBeUndefined();
  });

  it('a new default store elsewhere is the default moved; a named one, or one with keys of its own, is not', () => {
    expect(storeReplaced(record, '/e/ledger.sqlite', true, { kind: 'missing' })).toEqual({
      kind: 'moved',
      expected: used,
      location: '/e/ledger.sqlite',
    });
    expect(storeReplaced(record, '/e/ledger.sqlite', true, { kind: 'opened', id: 'x', keys: 0 })?.kind).toBe('moved');
    expect(storeReplaced(record, '/e/ledger.sqlite', true, { kind: 'opened', id: 'x', keys: 5 })).toBeUndefined();
    expect(storeReplaced(record, '/e/ledger.sqlite', false, { kind: 'missing' })).toBeUndefined();
    expect(storeReplaced({ stores: [] }, used.location, true, { kind: 'missing' })).toBeUndefined();
  });

  it('a store that never held a key is not recorded; ledger new records it whatever it holds', () => {
    const use = { location: '/e/ledger.sqlite', id: 'b', keys: 0, isDefault: true };
    expect(withUse(record, use, 5)).toBe(record);
    expect(withUse(record, use, 5, true)).toEqual({
      defaultLocation: '/e/ledger.sqlite',
      stores: [used, { location: '/e/ledger.sqlite', id: 'b', keys: 0, lastUsedMs: 5 }],
    });
  });
});

describe('openKnownLedgerStore', () => {
  let dir: string;
  let env: Record<string, string>;
  const opened: LedgerStore[] = [];
  const open = async (e = env) => {
    const store = await openKnownLedgerStore(e);
    opened.push(store);
    return store;
  };
  /** A store that held keys and was recorded as used. */
  async function usedStore(e = env): Promise<LedgerStore> {
    const store = await open(e);
    await store.decide({
      batchId: 'b',
      rowId: 'r1',
      idempotencyKey: 'k1',
      request: { model: 'sdxl', prompt: 'a kite' },
      requestSha256: 'sha',
      fingerprint: 'fp',
      outDir: dir,
      reuse: true,
    });
    await rememberLedgerStore(e, store);
    await store.close();
    return store;
  }

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'ib-known-'));
    env = { HOME: dir, XDG_DATA_HOME: path.join(dir, 'data'), XDG_CONFIG_HOME: path.join(dir, 'config') };
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close().catch(() => undefined)));
    await rm(dir, { recursive: true, force: true });
  });

  const refusal = (e = env) =>
    open(e).then(
      () => undefined,
      (err: unknown) => err,
    );

  it('records the default store once it holds keys, in the config folder', async () => {
    const store = await usedStore();
    const known = await readKnownStores(knownStoresFile(env));
    expect(known.defaultLocation).toBe(store.location);
    expect(known.stores).toMatchObject([{ location: store.location, id: store.id, keys: 1 }]);
    expect(knownStoresFile(env)).toBe(path.join(dir, 'config', 'imagebatch', 'stores.json'));
  });

  it('a deleted store stops, and no new store is made in its place', async () => {
    const store = await usedStore();
    await rm(store.location);
    const err = await refusal();
    expect(err).toBeInstanceOf(LedgerReplacedError);
    expect((err as LedgerReplacedError).code).toBe(ErrorCode.LedgerReplaced);
    expect((err as Error).message).toContain(`the ledger store ${store.location} is missing`);
    expect((err as Error).message).toContain(`store ${store.id}, 1 key(s)`);
    await expect(readFile(store.location)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an emptied store (0 bytes) stops, and so does another store in its place', async () => {
    const store = await usedStore();
    await truncate(store.location, 0);
    expect(((await refusal()) as Error).message).toContain('is an empty file (0 bytes)');
    // Another store written where it was: opened, found to be another, closed.
    await rm(store.location);
    await usedStore({ ...env, XDG_CONFIG_HOME: path.join(dir, 'elsewhere') });
    expect(((await refusal()) as Error).message).toMatch(/is another store \(store [0-9a-f-]+, 1 key\(s\)\) than/);
  });

  it('a default store moved with the data folder stops, naming the one to set', async () => {
    const store = await usedStore();
    const err = await refusal({ ...env, XDG_DATA_HOME: path.join(dir, 'data2') });
    expect((err as Error).message).toContain(`Set IMAGEBATCH_LEDGER=${store.location} to go on with it`);
    // Following it opens the store that was used.
    const again = await open({ ...env, XDG_DATA_HOME: path.join(dir, 'data2'), IMAGEBATCH_LEDGER: store.location });
    expect(again.id).toBe(store.id);
  });

  it('ledger new adopts the store in place and says what it replaced; then it opens', async () => {
    const store = await usedStore();
    await rm(store.location);
    const adopted = await adoptLedgerStore(env);
    expect(adopted.location).toBe(store.location);
    expect(adopted.id).not.toBe(store.id);
    expect(adopted.replaced).toMatchObject({ kind: 'missing', expected: { id: store.id, keys: 1 } });
    expect((await open()).id).toBe(adopted.id);
    expect((await adoptLedgerStore(env)).replaced).toBeUndefined();
  });

  it('a record that cannot be read stops, naming its file', async () => {
    await usedStore();
    await writeFile(knownStoresFile(env), '{ not json');
    await expect(open()).rejects.toThrow(`(${knownStoresFile(env)}) cannot be read: it is not the JSON`);
  });
});
