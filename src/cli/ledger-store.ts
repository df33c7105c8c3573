import { requestFingerprinter } from '../activities/key-ledger';
import { loadServiceConfig } from '../config/service-config';
import {
  importJsonlLedger,
  openKnownLedgerStore,
  rememberLedgerStore,
  type Fingerprinter,
  type LedgerStore,
} from '../ledger';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Runs `work` with the ledger store `IMAGEBATCH_LEDGER` names (the worker's, when both read one environment), and
 * closes it after. A store that cannot be reached is an error that names it, and so is one that would silently
 * replace the store this user used (missing, emptied, another): nothing is started without it.
 */
export async function withLedgerStore<T>(env: Env, work: (store: LedgerStore) => Promise<T>): Promise<T> {
  const store = await openKnownLedgerStore(env);
  try {
    return await work(store);
  } finally {
    await rememberLedgerStore(env, store);
    await store.close();
  }
}

/**
 * Takes an output folder's `ledger.jsonl` of an earlier version into the store (once), with the prints the worker's
 * settings in `env` make (the process's environment when not given). Settings that cannot be read leave it to the
 * worker, which imports it with its own.
 */
export async function importOutputFolder(store: LedgerStore, outDir: string, env?: Env): Promise<void> {
  let fingerprintOf: Fingerprinter;
  try {
    fingerprintOf = requestFingerprinter(loadServiceConfig(env));
  } catch {
    return;
  }
  // A folder this machine cannot read (a cluster's workers') is the workers' to import.
  await importJsonlLedger(store, outDir, fingerprintOf).catch(() => undefined);
}
