import { stat } from 'node:fs/promises';
import {
  LedgerReplacedError,
  knownStoresFile,
  readKnownStores,
  recordStoreUse,
  storeReplaced,
  type StoreReplaced,
  type StoreSeen,
  type StoreUse,
} from './known-stores';
import { describeLedgerLocation, IMAGEBATCH_LEDGER_ENV, ledgerLocation, openLedgerStore } from './location';
import type { LedgerLocation } from './location';
import type { LedgerStore } from './store';

type Env = Readonly<Record<string, string | undefined>>;

/** What a SQLite store's file shows before it is opened (opening a missing or empty file would make a new store). */
async function seenBeforeOpen(location: LedgerLocation): Promise<StoreSeen> {
  if (location.kind !== 'sqlite') return { kind: 'unseen' };
  try {
    return (await stat(location.file)).size === 0 ? { kind: 'empty-file' } : { kind: 'unseen' };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'unseen' };
  }
}

/**
 * Opens the store `IMAGEBATCH_LEDGER` names, but never one that silently replaces the store this user used there
 * (src/ledger/known-stores.ts): a missing, emptied or other store, or a new default store where another held keys,
 * is a {@link LedgerReplacedError} and nothing is made or opened for good. The store is recorded as used.
 */
export async function openKnownLedgerStore(env: Env): Promise<LedgerStore> {
  const location = ledgerLocation(env);
  const where = describeLedgerLocation(location);
  const isDefault = !env[IMAGEBATCH_LEDGER_ENV]?.trim();
  const known = await readKnownStores(knownStoresFile(env));
  const before = storeReplaced(known, where, isDefault, await seenBeforeOpen(location));
  if (before) throw new LedgerReplacedError(before, where);
  const store = await openLedgerStore(location);
  try {
    const keys = await store.lastKeyPosition();
    const after = storeReplaced(known, where, isDefault, { kind: 'opened', id: store.id, keys });
    if (after) throw new LedgerReplacedError(after, where);
    await recordQuietly(env, { location: where, id: store.id, keys, isDefault });
    return store;
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** Records that `store` was used, with the keys it holds now (after a command's work, and while a worker runs). */
export async function rememberLedgerStore(env: Env, store: LedgerStore): Promise<void> {
  const keys = await store.lastKeyPosition().catch(() => undefined);
  if (keys === undefined) return;
  const isDefault = !env[IMAGEBATCH_LEDGER_ENV]?.trim();
  await recordQuietly(env, { location: store.location, id: store.id, keys, isDefault });
}

/**
 * A record that cannot be written (a read-only home) does not stop the work: the store itself holds the facts;
 * only the protection against its loss is missing.
 */
async function recordQuietly(env: Env, use: StoreUse): Promise<void> {
  await recordStoreUse(knownStoresFile(env), use).catch(() => undefined);
}

/** What `imagebatch ledger new` did: the store now in use, and what the one it replaced held. */
export interface AdoptedStore {
  location: string;
  id: string;
  keys: number;
  /** The store this user used before, which the adopted one does not know; none when nothing was replaced. */
  replaced?: StoreReplaced;
}

/**
 * `imagebatch ledger new`: the store `IMAGEBATCH_LEDGER` names (made when missing or empty) becomes the one in use
 * at its place, whatever was known there before. What it replaced is said: the requests that store paid for may be
 * paid again.
 */
export async function adoptLedgerStore(env: Env): Promise<AdoptedStore> {
  const location = ledgerLocation(env);
  const where = describeLedgerLocation(location);
  const isDefault = !env[IMAGEBATCH_LEDGER_ENV]?.trim();
  const file = knownStoresFile(env);
  const known = await readKnownStores(file);
  const before = storeReplaced(known, where, isDefault, await seenBeforeOpen(location));
  const store = await openLedgerStore(location);
  try {
    const keys = await store.lastKeyPosition();
    const replaced = before ?? storeReplaced(known, where, isDefault, { kind: 'opened', id: store.id, keys });
    await recordStoreUse(file, { location: where, id: store.id, keys, isDefault }, Date.now(), true);
    return { location: where, id: store.id, keys, ...(replaced ? { replaced } : {}) };
  } finally {
    await store.close();
  }
}
