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

/** The store `IMAGEBATCH_LEDGER` names, opened, and what the record of stores says of it. */
interface PlacedStore {
  store: LedgerStore;
  use: StoreUse;
  /** The store this user used there (or by default) that it would replace; none when it replaces nothing. */
  replaced?: StoreReplaced;
}

/**
 * Opens the store `IMAGEBATCH_LEDGER` names, checked against the record of stores before (a missing or empty
 * SQLite file) and after it is opened. A store found replaced before it is opened is not opened (nor made), unless
 * `adopt`: then it is made, and the finding returned.
 */
async function openAtPlace(env: Env, adopt: boolean): Promise<PlacedStore> {
  const location = ledgerLocation(env);
  const where = describeLedgerLocation(location);
  const isDefault = !env[IMAGEBATCH_LEDGER_ENV]?.trim();
  const known = await readKnownStores(knownStoresFile(env));
  const before = storeReplaced(known, where, isDefault, await seenBeforeOpen(location));
  if (before && !adopt) throw new LedgerReplacedError(before, where);
  const store = await openLedgerStore(location);
  try {
    const keys = await store.lastKeyPosition();
    const replaced = before ?? storeReplaced(known, where, isDefault, { kind: 'opened', id: store.id, keys });
    return { store, use: { location: where, id: store.id, keys, isDefault }, ...(replaced ? { replaced } : {}) };
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Opens the store `IMAGEBATCH_LEDGER` names, but never one that silently replaces the store this user used there
 * (src/ledger/known-stores.ts): a missing, emptied or other store, or a new default store where another held keys,
 * is a {@link LedgerReplacedError} and nothing is made or opened for good. The store is recorded as used.
 */
export async function openKnownLedgerStore(env: Env): Promise<LedgerStore> {
  const { store, use, replaced } = await openAtPlace(env, false);
  if (replaced) {
    await store.close().catch(() => undefined);
    throw new LedgerReplacedError(replaced, use.location);
  }
  await recordQuietly(env, use);
  return store;
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
  const { store, use, replaced } = await openAtPlace(env, true);
  try {
    await recordStoreUse(knownStoresFile(env), use, Date.now(), true);
    return { location: use.location, id: use.id, keys: use.keys, ...(replaced ? { replaced } : {}) };
  } finally {
    await store.close();
  }
}
