import { mkdtempSync } from 'node:fs';
import { appendFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  LEDGER_FILE,
  LEDGER_VERSION,
  ledgerLocation,
  openLedgerStore,
  type LedgerStore,
  type NewLedgerEvent,
} from '../../src/ledger';
import type { CreationRequest } from '../../src/model';

/** A new, empty SQLite ledger file's path in a temporary folder (for IMAGEBATCH_LEDGER, or to open twice). */
export function tempLedgerFile(): string {
  return path.join(mkdtempSync(path.join(os.tmpdir(), 'ib-ledger-')), 'ledger.sqlite');
}

/** A new, empty ledger store of its own (SQLite, in a temporary folder); at `file` when given. */
export function tempLedger(file: string = tempLedgerFile()): Promise<LedgerStore> {
  return openLedgerStore({ kind: 'sqlite', file });
}

/**
 * A ledger store of its own, opened at its first use: for code that builds activities synchronously. Its `id` is
 * known once it is open (a test that compares ids opens a store with {@link tempLedger} instead).
 */
export function lazyTempLedger(file: string = tempLedgerFile()): LedgerStore {
  let opened: Promise<LedgerStore> | undefined;
  let store: LedgerStore | undefined;
  const open = async () => (store = await (opened ??= tempLedger(file)));
  const call =
    <K extends keyof LedgerStore>(name: K) =>
    async (...args: unknown[]) =>
      ((await open())[name] as (...a: unknown[]) => unknown)(...args);
  return {
    location: file,
    get id(): string {
      if (!store) throw new Error('lazyTempLedger: its id is known once it is open');
      return store.id;
    },
    append: call('append') as LedgerStore['append'],
    decide: call('decide') as LedgerStore['decide'],
    unbind: call('unbind') as LedgerStore['unbind'],
    key: call('key') as LedgerStore['key'],
    row: call('row') as LedgerStore['row'],
    rowsOf: call('rowsOf') as LedgerStore['rowsOf'],
    rows: call('rows') as LedgerStore['rows'],
    batches: call('batches') as LedgerStore['batches'],
    summarize: call('summarize') as LedgerStore['summarize'],
    keys: call('keys') as LedgerStore['keys'],
    lastKeyPosition: call('lastKeyPosition') as LedgerStore['lastKeyPosition'],
    paidCounts: call('paidCounts') as LedgerStore['paidCounts'],
    chargesSeen: call('chargesSeen') as LedgerStore['chargesSeen'],
    serviceProof: call('serviceProof') as LedgerStore['serviceProof'],
    proveService: call('proveService') as LedgerStore['proveService'],
    importedBytes: call('importedBytes') as LedgerStore['importedBytes'],
    importEvents: call('importEvents') as LedgerStore['importEvents'],
    close: async () => {
      if (opened) await (await opened).close();
    },
  };
}

/** Writes events as an earlier version did: `ledger.jsonl` lines in an output folder (imported by the store). */
export async function writeJsonlLedger(
  outDir: string,
  events: readonly NewLedgerEvent[],
  at = new Date(),
): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const lines = events.map((e) => `\n${JSON.stringify({ v: LEDGER_VERSION, at: at.toISOString(), ...e })}\n`);
  await appendFile(path.join(outDir, LEDGER_FILE), lines.join(''));
}

/** A request's print for tests: made up, but the same for the same request. */
export const testPrint = (request: CreationRequest) => ({
  requestSha256: `body:${request.prompt}|${request.model}`,
  fingerprint: `print:${request.prompt}|${request.model}`,
});

/**
 * The store the commands and workers a test starts use when nothing names one: the default of this test file's
 * user data folder (test/setup.ts gives each file its own).
 */
export function defaultLedger(): Promise<LedgerStore> {
  return openLedgerStore(ledgerLocation(process.env));
}
