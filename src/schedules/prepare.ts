import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import { request, type Dispatcher } from 'undici';
import type { BatchCursor, CreationRequest } from '../model';
import { isKnownColumn, readBatchPage } from '../batch';
import { CLAIMS_DIR, claimFileName, claimOwner, markScheduleRun, releaseRow } from '../ledger/claims';
import { eachRow, importJsonlLedger, rowMayBePaid, type Fingerprinter, type LedgerStore } from '../ledger';
import {
  CannotStartReason,
  checkScheduledSource,
  ScheduledRunCannotStartError,
  type SourceCheckOptions,
} from './source-check';
import { runBatchIds } from './runs';

/** The record of succeeded row ids that schedules wrote before the ledgers; still read, no longer written. */
export const LEGACY_SUCCEEDED_IDS_FILE = 'succeeded-ids.txt';

/** The ledger store as a schedule's preparation reads it. */
export interface ScheduleLedger {
  store: LedgerStore;
  fingerprintOf: Fingerprinter;
}

/** Options of {@link prepareScheduledInput}. */
export interface PrepareInput {
  /** A path the worker can read, or an http(s) URL. */
  source: string;
  /**
   * Folder of this run: `<schedule folder>/<batch id>`. Its ledger, and those of every other run of the schedule,
   * are in the schedule folder's subfolders; the claims in `<schedule folder>/claims/`.
   */
  runDir: string;
  /**
   * The run's batch id.
   * @default the last part of `runDir`
   */
  batchId?: string;
  /**
   * Leave out every row whose request (its fingerprint: what it asks, not its id or line) an earlier run may have
   * paid for (its ledger says so), or that another run holds the claim of; mark the run so that its rows claim
   * their request before they send.
   */
  skipSucceeded: boolean;
  /**
   * Whether another run's row is over for good: its workflow closed long enough ago that nothing of it can still
   * send (or Temporal no longer knows it). A claim of such a row, whose ledgers show nothing that may have been
   * paid, is given back and the row is run again. Without it, every claim held by another run is honoured.
   */
  rowSettled?: (batchId: string, rowId: string) => Promise<boolean>;
  defaultModel?: string;
  /**
   * Check the source as `imagebatch run` would before anything starts, with the schedule's columns: a file with
   * problems throws {@link ScheduledRunCannotStartError} naming them.
   * @default not checked (the runs of schedules made before it: invalid rows are only counted)
   */
  check?: SourceCheckOptions;
  /** The ledger store, and how a request's fingerprint is made (for the `ledger.jsonl` files of earlier versions). */
  ledger: ScheduleLedger;
  /**
   * Largest source accepted from a URL.
   * @default 512 MiB
   */
  maxBytes?: number;
}

export interface PreparedInput {
  /** The run's own copy of the batch file (ids made explicit, so positional ids stay stable). */
  file: string;
  rows: number;
  /** Rows left out: paid for (or maybe) by an earlier run, or held by another run. */
  skipped: number;
  /** Of the skipped rows, those another run holds the claim of (it runs them now). */
  claimed?: number;
  /** Claims of rows that ended long ago with nothing held, given back: those rows are run again. */
  released?: number;
  invalid: number;
}

const COLUMNS = ['id', 'prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;

/**
 * Makes the input of one scheduled run: fetches the source (file or URL), and writes the rows to run, with their
 * ids. With `skipSucceeded`, rows are identified across runs by what they ask (the request's fingerprint, as the
 * ledger store keeps it), not by their id or line: a row is left out when any run's ledger says its request may
 * have been paid for (succeeded, unknown, timed out, images unsaved, in flight, or sent with no answer known), or
 * when another run holds the request's claim; a request that ended with nothing held (refused, refunded) runs
 * again. So a growing or reordered file only pays for its new and changed requests, a row inserted into a file
 * without ids shifts nothing, and a cancelled, terminated or failed run, whose ledger was written row by row as it
 * went, is never paid for again. The copy also pins the run to the file as it was when the run started.
 */
export async function prepareScheduledInput(input: PrepareInput, dispatcher?: Dispatcher): Promise<PreparedInput> {
  await mkdir(input.runDir, { recursive: true });
  const scheduleDir = path.dirname(path.resolve(input.runDir));
  const batchId = input.batchId ?? path.basename(path.resolve(input.runDir));
  // Marked before any row can start: from here on, this run's rows claim themselves before they send.
  if (input.skipSucceeded) await markScheduleRun(input.runDir, scheduleDir, batchId);
  const source = /^https?:\/\//i.test(input.source)
    ? await download(
        input.source,
        path.join(input.runDir, 'source.csv'),
        input.maxBytes ?? 512 * 1024 * 1024,
        dispatcher,
      )
    : input.source;
  if (input.check) await checkScheduledSource(source, input.check);
  const paid = input.skipSucceeded ? await paidRequests(scheduleDir, input.ledger) : undefined;
  const claimNames = input.skipSucceeded ? await claimFileNames(scheduleDir) : new Set<string>();
  const userColumns = { ...input.check?.userColumns, readAll: true };
  const out: string[][] = [[...COLUMNS]];
  // The user's own columns (`--carry`, `--column`) are copied as they are, after ours: the run's batch checks them
  // against its options when it reads the copy.
  let own: string[] | undefined;
  let skipped = 0;
  let claimed = 0;
  let released = 0;
  let invalid = 0;
  let cursor: BatchCursor | undefined;
  for (;;) {
    const page = await readBatchPage(source, cursor, {
      maxRows: 1000,
      ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
      userColumns,
    });
    if (own === undefined) {
      own = [...new Set(page.nextCursor.header.filter((c) => c !== '' && !isKnownColumn(c)))];
      out[0]!.push(...own);
    }
    invalid += page.invalidRows;
    for (const row of page.rows) {
      const print = paid ? printOf(input.ledger.fingerprintOf, row.request) : undefined;
      if (paid && ((print !== undefined && paid.prints.has(print)) || paid.ids.has(row.rowId))) {
        skipped += 1;
        continue;
      }
      if (print !== undefined && claimNames.has(claimFileName(print))) {
        const owner = await claimOwner(scheduleDir, print);
        if (owner !== undefined && owner.batchId !== batchId) {
          // Another run holds it, and no ledger says it may be paid: it is being run now, unless its row is over
          // for good (then it ended with nothing held, and its claim was never given back).
          if (input.rowSettled && (await input.rowSettled(owner.batchId, owner.rowId))) {
            await releaseRow(scheduleDir, print, owner.batchId);
            released += 1;
          } else {
            skipped += 1;
            claimed += 1;
            continue;
          }
        }
      }
      const r = row.request;
      out.push([
        row.rowId,
        r.prompt,
        r.model,
        r.negative_prompt ?? '',
        ...[r.width, r.height, r.seed, r.num_images].map((v) => (v === undefined ? '' : String(v))),
        ...own.map((c) => row.columns?.[c] ?? ''),
      ]);
    }
    if (page.done) break;
    cursor = page.nextCursor;
  }
  const file = path.join(input.runDir, 'input.csv');
  await writeAtomic(file, stringify(out));
  return { file, rows: out.length - 1, skipped, claimed, released, invalid };
}

/** What the runs of a schedule may have paid for. */
export interface PaidRequests {
  /** The fingerprints of the requests any run may have paid for. */
  prints: Set<string>;
  /**
   * Ids of rows that may have been paid for with no request known: a record with no key of its own in the store
   * (rebuilt by a batch's safety net), and the old record of succeeded ids. Matched by id: never paid again.
   */
  ids: Set<string>;
}

/**
 * What any run of the schedule may have paid for: every run's rows in the ledger store (a run's batch id is its
 * folder's name), row by row ({@link rowMayBePaid}), by the fingerprints of their keys' requests.
 */
export async function paidRequests(scheduleDir: string, ledger: ScheduleLedger): Promise<PaidRequests> {
  const paid: PaidRequests = {
    prints: new Set(),
    ids: await readIds(path.join(scheduleDir, LEGACY_SUCCEEDED_IDS_FILE)),
  };
  for (const batchId of await runBatchIds(scheduleDir)) {
    // A run of an earlier version kept its ledger in its folder: taken in once.
    await importJsonlLedger(ledger.store, path.join(scheduleDir, batchId), ledger.fingerprintOf);
    for await (const row of eachRow(ledger.store, batchId)) {
      if (!rowMayBePaid(row)) continue;
      if (row.keys.length === 0) paid.ids.add(row.rowId);
      for (const key of row.keys) paid.prints.add(key.fingerprint);
    }
  }
  return paid;
}

/** A row's fingerprint with the worker's settings; undefined when they cannot shape it (its key will say why). */
function printOf(fingerprintOf: Fingerprinter, request: CreationRequest): string | undefined {
  try {
    return fingerprintOf(request).fingerprint;
  } catch {
    return undefined;
  }
}

async function claimFileNames(scheduleDir: string): Promise<Set<string>> {
  try {
    return new Set((await readdir(path.join(scheduleDir, CLAIMS_DIR))).filter((n) => !n.startsWith('.')));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
}

async function readIds(file: string): Promise<Set<string>> {
  try {
    return new Set((await readFile(file, 'utf8')).split('\n').filter((l) => l !== ''));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
}

async function download(url: string, dest: string, maxBytes: number, dispatcher?: Dispatcher): Promise<string> {
  const res = await request(url, {
    method: 'GET',
    headersTimeout: 30_000,
    bodyTimeout: 60_000,
    ...(dispatcher ? { dispatcher } : {}),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    const message = `fetching the batch source ${url}: HTTP ${res.statusCode}`;
    // A 4xx says the source is not there for this request: the run cannot start (the next tick asks again).
    if (res.statusCode >= 400 && res.statusCode < 500) {
      throw new ScheduledRunCannotStartError(CannotStartReason.Unreadable, message);
    }
    throw new Error(message);
  }
  const declared = Number(res.headers['content-length'] ?? NaN);
  if (declared > maxBytes) {
    await res.body.dump();
    throw new Error(`the batch source ${url} is ${declared} bytes, over the limit of ${maxBytes}`);
  }
  const tmp = `${dest}.tmp`;
  let seen = 0;
  res.body.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > maxBytes) res.body.destroy(new Error(`the batch source ${url} is over the limit of ${maxBytes} bytes`));
  });
  try {
    await pipeline(res.body, createWriteStream(tmp));
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await rename(tmp, dest);
  return dest;
}

async function writeAtomic(file: string, content: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, content, 'utf8');
  await rename(tmp, file);
}
