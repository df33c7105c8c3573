import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { userConfigFolder } from '../util/data-folder';

type Env = Readonly<Record<string, string | undefined>>;

/** The record of the ledger stores this user used, in imagebatch's folder of the user's config folder. */
export const KNOWN_STORES_FILE = 'stores.json';

/** A store that held keys when this user last used it: a new or empty store in its place pays those again. */
export interface KnownStore {
  /** The store's location as messages show it (a URL without its password). */
  location: string;
  /** The store's id (`ledger_meta.store_id`): a store made anew at the same place has another. */
  id: string;
  /** Keys it held (its last key's position): 0 means it never recorded a request. */
  keys: number;
  /** When a command or worker of this user last used it (ms since the epoch). */
  lastUsedMs: number;
}

/** What {@link KNOWN_STORES_FILE} holds. */
export interface KnownStores {
  /** The location of the default store (`IMAGEBATCH_LEDGER` unset) when it last held keys. */
  defaultLocation?: string;
  stores: KnownStore[];
}

const fileSchema = z.object({
  defaultLocation: z.string().optional(),
  stores: z.array(z.object({ location: z.string(), id: z.string(), keys: z.number(), lastUsedMs: z.number() })),
});

/** The most stores the record keeps: the least recently used go first. */
const KEPT = 200;

/** Where this user's record of stores is. */
export const knownStoresFile = (env: Env, platform?: NodeJS.Platform) =>
  path.join(userConfigFolder(env, platform), KNOWN_STORES_FILE);

/** The record in `file`; none yet is an empty record, one that cannot be read stops (what it knew is unknown). */
export async function readKnownStores(file: string): Promise<KnownStores> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { stores: [] };
    throw new KnownStoresUnreadableError(file, (err as NodeJS.ErrnoException).code ?? String(err));
  }
  try {
    const parsed = fileSchema.parse(JSON.parse(text));
    return parsed.defaultLocation === undefined ? { stores: parsed.stores } : parsed;
  } catch {
    throw new KnownStoresUnreadableError(file, 'it is not the JSON imagebatch writes');
  }
}

/** How a store was chosen and what it is, for the record. */
export interface StoreUse {
  location: string;
  id: string;
  keys: number;
  /** Chosen with `IMAGEBATCH_LEDGER` unset. */
  isDefault: boolean;
}

/**
 * The record with `use` in it. A store that never held a key is not recorded (it can be made anew at no cost),
 * unless `adopt` (`imagebatch ledger new`): then it replaces whatever was known at its place.
 */
export function withUse(known: KnownStores, use: StoreUse, nowMs: number, adopt = false): KnownStores {
  if (use.keys === 0 && !adopt) return known;
  const others = known.stores.filter((s) => s.location !== use.location);
  const stores = [{ location: use.location, id: use.id, keys: use.keys, lastUsedMs: nowMs }, ...others]
    .sort((a, b) => b.lastUsedMs - a.lastUsedMs)
    .slice(0, KEPT);
  const defaultLocation = use.isDefault ? use.location : known.defaultLocation;
  return defaultLocation === undefined ? { stores } : { defaultLocation, stores };
}

/** Writes the record whole (a temporary file renamed over it: a reader never sees half of it). */
export async function writeKnownStores(file: string, known: KnownStores): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, `${JSON.stringify(known, null, 2)}\n`, { mode: 0o600 });
  await rename(partial, file);
}

/** Records `use` in the record at `file` (read again first: another process may have written since). */
export async function recordStoreUse(file: string, use: StoreUse, nowMs = Date.now(), adopt = false): Promise<void> {
  const known = await readKnownStores(file);
  const next = withUse(known, use, nowMs, adopt);
  if (next !== known) await writeKnownStores(file, next);
}

/** What is found at a store's place, before it is opened (a SQLite file) or after (any store). */
export type StoreSeen =
  | { kind: 'missing' }
  | { kind: 'empty-file' }
  | { kind: 'opened'; id: string; keys: number }
  /** A store whose file cannot be looked at before it is opened (PostgreSQL): only what opening shows counts. */
  | { kind: 'unseen' };

/** Why a store may not be used in place of the one this user used. */
export type StoreReplaced =
  | { kind: 'missing' | 'empty-file'; expected: KnownStore }
  | { kind: 'other'; expected: KnownStore; found: { id: string; keys: number } }
  | { kind: 'moved'; expected: KnownStore; location: string };

/**
 * Whether the store at `location` may be used, given the record: a store known there with keys must be the same
 * one (same id, present, not emptied); the default store, when new or empty, must be where the default store that
 * held keys was (another HOME, XDG_DATA_HOME or platform folder moves it).
 */
export function storeReplaced(
  known: KnownStores,
  location: string,
  isDefault: boolean,
  seen: StoreSeen,
): StoreReplaced | undefined {
  const here = known.stores.find((s) => s.location === location && s.keys > 0);
  if (here) {
    if (seen.kind === 'missing' || seen.kind === 'empty-file') return { kind: seen.kind, expected: here };
    if (seen.kind === 'opened' && seen.id !== here.id) {
      return { kind: 'other', expected: here, found: { id: seen.id, keys: seen.keys } };
    }
    return undefined;
  }
  const fresh = seen.kind === 'missing' || seen.kind === 'empty-file' || (seen.kind === 'opened' && seen.keys === 0);
  if (!isDefault || !fresh || known.defaultLocation === undefined || known.defaultLocation === location) {
    return undefined;
  }
  const before = known.stores.find((s) => s.location === known.defaultLocation && s.keys > 0);
  return before ? { kind: 'moved', expected: before, location } : undefined;
}

/** The record of stores cannot be read: what it knew is unknown, so nothing starts. */
export class KnownStoresUnreadableError extends ImagebatchError {
  readonly code = ErrorCode.LedgerReplaced;
  constructor(file: string, problem: string) {
    super(
      `the record of the ledger stores this user used (${file}) cannot be read: ${problem}. ` +
        'Put it right, or move it away to start a new record (a store it named could then be replaced unnoticed)',
    );
  }
}

const AFRESH = 'imagebatch ledger new to start afresh here (the requests it paid for may be paid again)';

/** A store is missing, emptied, another, or the default moved: nothing is started, and the message says how to go on. */
export class LedgerReplacedError extends ImagebatchError {
  readonly code = ErrorCode.LedgerReplaced;
  constructor(
    readonly finding: StoreReplaced,
    location: string,
  ) {
    super(replacedMessage(finding, location));
  }
}

/** The one-paragraph message of {@link LedgerReplacedError}. */
export function replacedMessage(finding: StoreReplaced, location: string): string {
  const { expected } = finding;
  const was = `store ${expected.id}, ${expected.keys} key(s), last used ${new Date(expected.lastUsedMs).toISOString()}`;
  switch (finding.kind) {
    case 'missing':
    case 'empty-file':
      return (
        `the ledger store ${location} is ${finding.kind === 'missing' ? 'missing' : 'an empty file (0 bytes)'}; ` +
        `it held what was paid (${was}). Nothing was started. Put it back from a backup, or run ${AFRESH}`
      );
    case 'other':
      return (
        `the ledger store ${location} is another store (store ${finding.found.id}, ${finding.found.keys} key(s)) ` +
        `than the one used there (${was}). Nothing was started. Put that one back, or run ${AFRESH}`
      );
    case 'moved':
      return (
        `the default ledger store is now ${location}, a new one (its folder follows HOME and XDG_DATA_HOME), but ` +
        `this user's store is ${expected.location} (${was}). Nothing was started. Set ` +
        `IMAGEBATCH_LEDGER=${expected.location} to go on with it, or run ${AFRESH}`
      );
    default: {
      const never: never = finding;
      return never;
    }
  }
}
