import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { LEDGER_VERSION, type Fingerprinter, type LedgerEvent } from './events';
import type { LedgerStore } from './store';

/**
 * The `ledger.jsonl` files of earlier versions, one per output folder: imported into the store once, so that no
 * payment they remember is forgotten. Nothing writes them any more. The import goes on from where it stopped (the
 * store keeps how many bytes of each file it took in), so a file is never applied twice.
 */
export const LEDGER_FILE = 'ledger.jsonl';

/** The `ledger.jsonl` file of an output folder. */
export function ledgerFileOf(outDir: string): string {
  return path.join(outDir, LEDGER_FILE);
}

/** Lines applied per transaction. */
const LINES_PER_COMMIT = 1000;

export interface ImportResult {
  /** Events taken in by this call. */
  events: number;
  /** Lines that could not be read (torn by a crash, or of another version), skipped. */
  unreadable: number;
}

/**
 * Imports what the store has not yet taken in of an output folder's `ledger.jsonl` (nothing when there is none).
 * Each key's print is made again with `fingerprintOf` (the files held a hash of the request fields, the store
 * hashes of the bytes sent), and its output folder is the file's.
 */
export async function importJsonlLedger(
  store: LedgerStore,
  outDir: string,
  fingerprintOf: Fingerprinter,
): Promise<ImportResult> {
  const file = path.resolve(ledgerFileOf(outDir));
  const size = await stat(file).then(
    (s) => s.size,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return 0;
      throw err;
    },
  );
  const offset = await store.importedBytes(file);
  const result: ImportResult = { events: 0, unreadable: 0 };
  if (size <= offset) return result;
  const handle = await open(file, 'r');
  try {
    const bytes = Buffer.alloc(size - offset);
    await handle.read(bytes, 0, bytes.length, offset);
    let start = 0;
    let batch: LedgerEvent[] = [];
    let lines = 0;
    for (let nl = bytes.indexOf(0x0a); nl !== -1; start = nl + 1, nl = bytes.indexOf(0x0a, start)) {
      const line = bytes.toString('utf8', start, nl).trim();
      if (line) {
        const event = parseLine(line);
        if (event) batch.push(withFingerprint(event, path.dirname(file), fingerprintOf));
        else result.unreadable += 1;
        lines += 1;
      }
      if (lines >= LINES_PER_COMMIT) {
        await store.importEvents(file, batch, offset + nl + 1);
        result.events += batch.length;
        batch = [];
        lines = 0;
      }
    }
    // A last line without its newline is a write cut short: left for a later import, if it is ever completed.
    await store.importEvents(file, batch, offset + start);
    result.events += batch.length;
  } finally {
    await handle.close();
  }
  return result;
}

function withFingerprint(event: LedgerEvent, outDir: string, fingerprintOf: Fingerprinter): LedgerEvent {
  if (event.type === 'sending') return { ...event, ...fingerprintOf(event.request), outDir: event.outDir ?? outDir };
  if (event.type === 'batch') return { ...event, outDir: event.outDir ?? outDir };
  return event;
}

/** A ledger line as an event of this version, or undefined (torn by a crash, or of another version). */
export function parseLine(line: string): LedgerEvent | undefined {
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof event !== 'object' || event === null || (event as { v?: unknown }).v !== LEDGER_VERSION) return undefined;
  return event as LedgerEvent;
}
