import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import {
  KeyOutcome,
  NO_MONEY_HELD,
  rowMoney,
  RowState,
  type CreationRequest,
  type DownloadedImage,
  type KeyRecord,
  type RowRecord,
} from '../model';

/**
 * The ledger of a batch's output folder: the memory, on disk, of what was sent, paid and produced. Temporal forgets
 * a closed workflow after its namespace's retention, and the service forgets a key after its idempotency window;
 * the ledger forgets nothing. It is consulted before every submission, and `results` and `reconcile` read it.
 *
 * One file, `ledger.jsonl`, append-only: one JSON object per event, each written with one `write` (O_APPEND) and
 * flushed to disk (`fdatasync`) before the request it announces goes out. Every event starts on a line of its own
 * (it is written after a newline), so a line torn by a crash spoils only itself; a reader skips lines it cannot
 * read and counts them. Several workers (a cluster on a shared volume) append to the same file.
 */
export const LEDGER_FILE = 'ledger.jsonl';

/** Version of the event format; a reader ignores events of other versions (and counts them). */
export const LEDGER_VERSION = 1;

/** Size and SHA-256 of a batch file: two runs with the same batch id must read the same file. */
export interface FileFingerprint {
  size: number;
  sha256: string;
}

interface EventBase {
  v: typeof LEDGER_VERSION;
  /** ISO time of writing (the writer's clock). */
  at: string;
}

/** A batch started (or started again) on a file. */
export interface BatchEvent extends EventBase {
  type: 'batch';
  batchId: string;
  /** The batch file as the writer saw it. */
  file: string;
  fingerprint: FileFingerprint;
  defaultModel?: string;
}

interface KeyEventBase extends EventBase {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
}

/**
 * A key is about to be sent: written (and flushed) before the request leaves. The first one carries the body; every
 * later send of the key is written too, so that a send cut off by a crash is known to have left.
 */
export interface SendingEvent extends KeyEventBase {
  type: 'sending';
  /** The body, exactly as sent: `reconcile` re-sends it as it is. */
  request: CreationRequest;
  /** {@link requestFingerprint} of `request`. */
  requestSha256: string;
}

/**
 * A send of the key got an answer that proves the service stored nothing for it and charged nothing (429, 401, 403,
 * a local hold): that send does not start the idempotency window.
 */
export interface UnseenEvent extends KeyEventBase {
  type: 'unseen';
}

/** A send of the key got no answer that can be read (no response, a timeout, a 500): it may be stored, and charged. */
export interface AmbiguousEvent extends KeyEventBase {
  type: 'ambiguous';
}

/** The service accepted the key (202): a creation exists, and it was charged. */
export interface AcceptedEvent extends KeyEventBase {
  type: 'accepted';
  creationId: string;
  costUsd?: number;
}

/** What is known of how a key ended. */
export interface EndedEvent extends KeyEventBase {
  type: 'ended';
  outcome: KeyOutcome;
  creationId?: string;
  /** What the service said the key was charged, when it said. */
  costUsd?: number;
  /** The service's words. */
  error?: string;
  /** A failed creation: whether another key may pass (every failure string but the safety filter's). */
  retryable?: boolean;
  /** The saved images of a creation that succeeded. */
  images?: DownloadedImage[];
}

/** A row's complete record, written as the row ends (by the row, by the batch's safety net, or by reconcile). */
export interface RowEvent extends EventBase {
  type: 'row';
  by: 'row' | 'lookup' | 'reconcile';
  record: RowRecord;
}

export type LedgerEvent =
  BatchEvent | SendingEvent | UnseenEvent | AmbiguousEvent | AcceptedEvent | EndedEvent | RowEvent;

/** An event before it is stamped. */
export type NewLedgerEvent =
  | Omit<BatchEvent, 'v' | 'at'>
  | Omit<SendingEvent, 'v' | 'at'>
  | Omit<UnseenEvent, 'v' | 'at'>
  | Omit<AmbiguousEvent, 'v' | 'at'>
  | Omit<AcceptedEvent, 'v' | 'at'>
  | Omit<EndedEvent, 'v' | 'at'>
  | Omit<RowEvent, 'v' | 'at'>;

/** Everything the ledger knows of one key. */
export interface LedgerKey {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
  /** When the key was first sent (ms since the epoch, the writer's clock). */
  firstSentAtMs: number;
  /**
   * Since when the service may hold the key (the first send whose answer is not known to have stored nothing): the
   * idempotency window runs from here. Undefined while every send was answered 429, 401 or 403.
   */
  mayBeStoredSinceMs?: number;
  /** A send that left and has no answer yet (or never will: the worker died). */
  pendingSinceMs?: number;
  request: CreationRequest;
  requestSha256: string;
  creationId?: string;
  costUsd?: number;
  /** Its end, when known. */
  ended?: Omit<EndedEvent, 'v' | 'at' | 'type' | 'batchId' | 'rowId' | 'idempotencyKey'>;
}

/** Everything the ledger knows of one row of one batch. */
export interface LedgerRow {
  batchId: string;
  rowId: string;
  /** Its keys, in the order they were first sent. */
  keys: LedgerKey[];
  /** Its latest complete record, if one was written. */
  record?: RowRecord;
  /** Who wrote that record. */
  recordBy?: RowEvent['by'];
}

/** Whether a key may hold money: sent with no known end, accepted, or ended in anything but a refusal or refund. */
export function keyMayHoldMoney(key: LedgerKey): boolean {
  return !key.ended || !NO_MONEY_HELD.has(key.ended.outcome);
}

/** Whether a row may have been paid for: any key of it may hold money, whatever its record says. */
export function rowMayBePaid(row: LedgerRow): boolean {
  return row.keys.some(keyMayHoldMoney) || (row.record?.keys ?? []).some((k) => !NO_MONEY_HELD.has(k.outcome));
}

/** SHA-256 of a request's canonical JSON (fields sorted): the same body always gives the same fingerprint. */
export function requestFingerprint(request: CreationRequest): string {
  const entries = Object.entries(request)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify(Object.fromEntries(entries)))
    .digest('hex');
}

/** Size and SHA-256 of a file, read as a stream (a file of millions of rows never sits in memory). */
export async function fileFingerprint(file: string): Promise<FileFingerprint> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    const buf = chunk as Buffer;
    size += buf.length;
    hash.update(buf);
  }
  return { size, sha256: hash.digest('hex') };
}

/** The ledger file of an output folder. */
export function ledgerFileOf(outDir: string): string {
  return path.join(outDir, LEDGER_FILE);
}

/**
 * Appends events to a ledger, each on a line of its own, and flushes them to disk before returning: what a caller
 * does after `append` returns (send a request) is on disk first.
 */
export async function appendLedger(file: string, events: readonly NewLedgerEvent[], now = Date.now()): Promise<void> {
  if (events.length === 0) return;
  const at = new Date(now).toISOString();
  const text = events.map((e) => `\n${JSON.stringify({ v: LEDGER_VERSION, at, ...e })}`).join('') + '\n';
  const handle = await openToAppend(file);
  try {
    await handle.write(text);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/** Folders this process made (or found) for a ledger: made once, not at every append. */
const madeDirs = new Set<string>();

/** Opens a ledger to append, making its folder the first time, or again when it was removed since. */
async function openToAppend(file: string): Promise<FileHandle> {
  const dir = path.dirname(file);
  if (!madeDirs.has(dir)) {
    await mkdir(dir, { recursive: true });
    madeDirs.add(dir);
  }
  try {
    return await open(file, 'a');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await mkdir(dir, { recursive: true });
    return open(file, 'a');
  }
}

const rowKey = (batchId: string, rowId: string) => `${batchId}\u0000${rowId}`;

/** The events of one key. */
type KeyEvent = SendingEvent | UnseenEvent | AmbiguousEvent | AcceptedEvent | EndedEvent;

/**
 * Folds one event of a key into what is known of it (`known` is undefined before its first `sending`). Undefined for
 * an event of a key never sent (an orphan: its `sending` line was lost), which a reader counts as unreadable.
 */
function foldKey(known: LedgerKey | undefined, event: KeyEvent): LedgerKey | undefined {
  const at = Date.parse(event.at);
  if (event.type === 'sending') {
    if (!known) {
      return {
        batchId: event.batchId,
        rowId: event.rowId,
        idempotencyKey: event.idempotencyKey,
        firstSentAtMs: at,
        pendingSinceMs: at,
        request: event.request,
        requestSha256: event.requestSha256,
      };
    }
    // The send before this one got no answer: it may be stored.
    if (known.pendingSinceMs !== undefined) known.mayBeStoredSinceMs ??= known.pendingSinceMs;
    known.pendingSinceMs = at;
    return known;
  }
  if (!known) return undefined;
  switch (event.type) {
    case 'unseen':
    case 'ambiguous':
      if (event.type === 'ambiguous') known.mayBeStoredSinceMs ??= known.pendingSinceMs ?? at;
      break;
    case 'accepted':
      known.creationId = event.creationId;
      if (event.costUsd !== undefined) known.costUsd = event.costUsd;
      known.mayBeStoredSinceMs ??= known.pendingSinceMs ?? at;
      break;
    case 'ended': {
      const { v: _v, at: _at, type: _type, batchId: _b, rowId: _r, idempotencyKey: _k, ...ended } = event;
      known.ended = ended;
      known.mayBeStoredSinceMs ??= known.pendingSinceMs;
      if (ended.creationId) known.creationId = ended.creationId;
      if (ended.costUsd !== undefined) known.costUsd = ended.costUsd;
      break;
    }
  }
  delete known.pendingSinceMs;
  return known;
}

/** A ledger line as an event of this version, or undefined (torn by a crash, or of another version). */
function parseLine(line: string): LedgerEvent | undefined {
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof event !== 'object' || event === null || (event as { v?: unknown }).v !== LEDGER_VERSION) return undefined;
  return event as LedgerEvent;
}

/**
 * A ledger file read as it grows: {@link refresh} reads only what was appended since the last read and hands each
 * complete line, with its byte offset, to {@link apply}. Calls made at once (parallel activities of one worker) are
 * served one after the other, never two reads of one range. A missing file is an empty ledger; a file shorter than
 * what was read (replaced by hand) is read again from its start.
 */
abstract class LedgerReader {
  private offset = 0;
  /** The start of a line not yet complete (a write under way). */
  private pending: Buffer = Buffer.alloc(0);
  /** The refresh under way. */
  private reading: Promise<unknown> = Promise.resolve();
  /** Lines that could not be read (torn by a crash, of another version, or of a key never sent). */
  unreadableLines = 0;

  constructor(readonly file: string) {}

  /** Reads what was appended since the last call. */
  refresh(): Promise<this> {
    const next = this.reading.then(() => this.readNew());
    this.reading = next.catch(() => undefined);
    return next.then(() => this);
  }

  /** Takes in one event read at byte `lineAt` of the file; false when it cannot be used (counted as unreadable). */
  protected abstract apply(event: LedgerEvent, lineAt: number): boolean;

  /** Forgets everything taken in. */
  protected abstract clear(): void;

  private async readNew(): Promise<void> {
    let size: number;
    try {
      size = (await stat(this.file)).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    if (size < this.offset) this.reset();
    if (size === this.offset) return;
    const handle = await open(this.file, 'r');
    try {
      const length = size - this.offset;
      const buf = Buffer.alloc(length);
      let read = 0;
      while (read < length) {
        const { bytesRead } = await handle.read(buf, read, length - read, this.offset + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      const bytes = this.pending.length ? Buffer.concat([this.pending, buf.subarray(0, read)]) : buf.subarray(0, read);
      const bytesAt = this.offset - this.pending.length;
      this.offset += read;
      let start = 0;
      for (let nl = bytes.indexOf(0x0a); nl !== -1; start = nl + 1, nl = bytes.indexOf(0x0a, start)) {
        if (nl === start) continue;
        const line = bytes.toString('utf8', start, nl);
        if (!line.trim()) continue;
        const event = parseLine(line);
        if (!event || !this.apply(event, bytesAt + start)) this.unreadableLines += 1;
      }
      this.pending = Buffer.from(bytes.subarray(start));
    } finally {
      await handle.close();
    }
  }

  /** Forgets everything read, after any refresh under way: the next refresh reads the file from its start. */
  protected forget(): void {
    this.reading = this.reading.then(() => this.reset());
  }

  private reset(): void {
    this.clear();
    this.offset = 0;
    this.pending = Buffer.alloc(0);
    this.unreadableLines = 0;
  }
}

/**
 * What a ledger file says, folded event by event: every row with its keys (bodies included) and its latest record.
 * For the commands that read a ledger whole (`results`, `reconcile`); a worker consults a {@link LedgerKeyIndex}.
 */
export class LedgerView extends LedgerReader {
  private readonly rowsByKey = new Map<string, LedgerRow>();
  private readonly keysById = new Map<string, LedgerKey>();
  private readonly batchEvents = new Map<string, BatchEvent[]>();

  /** The row's entry, if the ledger knows it. */
  row(batchId: string, rowId: string): LedgerRow | undefined {
    return this.rowsByKey.get(rowKey(batchId, rowId));
  }

  /** The key's entry, if it was ever sent. */
  key(idempotencyKey: string): LedgerKey | undefined {
    return this.keysById.get(idempotencyKey);
  }

  /** Every row of a batch the ledger knows, in the order they first appeared. */
  rows(batchId: string): LedgerRow[] {
    return [...this.rowsByKey.values()].filter((r) => r.batchId === batchId);
  }

  /** The batch's start events, oldest first. */
  batches(batchId: string): readonly BatchEvent[] {
    return this.batchEvents.get(batchId) ?? [];
  }

  /** Batch ids the ledger knows. */
  batchIds(): string[] {
    const ids = new Set<string>([...this.batchEvents.keys()]);
    for (const r of this.rowsByKey.values()) ids.add(r.batchId);
    return [...ids];
  }

  protected apply(event: LedgerEvent): boolean {
    switch (event.type) {
      case 'batch': {
        const list = this.batchEvents.get(event.batchId) ?? [];
        list.push(event);
        this.batchEvents.set(event.batchId, list);
        return true;
      }
      case 'sending':
      case 'unseen':
      case 'ambiguous':
      case 'accepted':
      case 'ended': {
        const known = this.keysById.get(event.idempotencyKey);
        const key = foldKey(known, event);
        if (!key) return false;
        if (!known) {
          this.keysById.set(key.idempotencyKey, key);
          this.rowOf(event.batchId, event.rowId).keys.push(key);
        }
        return true;
      }
      case 'row': {
        const row = this.rowOf(event.record.batchId, event.record.rowId);
        row.record = event.record;
        row.recordBy = event.by;
        return true;
      }
      default:
        return false;
    }
  }

  protected clear(): void {
    this.rowsByKey.clear();
    this.keysById.clear();
    this.batchEvents.clear();
  }

  private rowOf(batchId: string, rowId: string): LedgerRow {
    const id = rowKey(batchId, rowId);
    let row = this.rowsByKey.get(id);
    if (!row) {
      row = { batchId, rowId, keys: [] };
      this.rowsByKey.set(id, row);
    }
    return row;
  }
}

/** FNV-1a over a key's UTF-16 code units, as a 32-bit integer (a small integer in V8: no allocation per key). */
export function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/**
 * Where each key's events lie in a ledger file, and nothing more: what a worker consults before every submission. By
 * a 32-bit hash of the key, the byte offsets of its lines: never the key itself, the rows' records, prompts or
 * images (107 bytes of heap a key, measured over 100,000 keys of 3 lines; the whole view held about 2.9 KB a row).
 * Keys whose hashes collide share a bucket; a lookup reads the bucket's lines again from the file and folds those of
 * its key (a row run again, or an attempt after a crash: a key never sent costs no read).
 */
export class LedgerKeyIndex extends LedgerReader {
  /** Line offsets by key hash, each array exactly as long as its lines (`concat`: one grown by `push` reserves 17 slots). */
  private readonly linesByHash = new Map<number, number[]>();

  /** @param hash the key's hash (a test gives one that collides) */
  constructor(
    file: string,
    private readonly hash: (key: string) => number = keyHash,
  ) {
    super(file);
  }

  /** Everything the ledger knows of the key, read from its lines; undefined when it was never sent. */
  async key(idempotencyKey: string): Promise<LedgerKey | undefined> {
    const lines = this.linesByHash.get(this.hash(idempotencyKey));
    if (!lines) return undefined;
    const handle = await open(this.file, 'r');
    try {
      let key: LedgerKey | undefined;
      for (const at of lines) {
        const event = parseLine(await readLineAt(handle, at));
        // Read and judged once already; the file changed under the index (replaced by hand) if it is not one now.
        if (!event || !isKeyEvent(event)) {
          this.forget();
          throw new Error(
            `the ledger ${this.file} changed under its index at byte ${at}: it is read again from its start`,
          );
        }
        // Another key of the bucket, or an event of this key before its first send (an orphan, counted as read).
        if (event.idempotencyKey === idempotencyKey) key = foldKey(key, event);
      }
      return key;
    } finally {
      await handle.close();
    }
  }

  protected apply(event: LedgerEvent, lineAt: number): boolean {
    if (!isKeyEvent(event)) return event.type === 'batch' || event.type === 'row';
    const h = this.hash(event.idempotencyKey);
    const lines = this.linesByHash.get(h);
    if (lines) this.linesByHash.set(h, lines.concat(lineAt));
    else if (event.type === 'sending') this.linesByHash.set(h, [lineAt]);
    else return false;
    return true;
  }

  protected clear(): void {
    this.linesByHash.clear();
  }
}

function isKeyEvent(event: LedgerEvent): event is KeyEvent {
  switch (event.type) {
    case 'sending':
    case 'unseen':
    case 'ambiguous':
    case 'accepted':
    case 'ended':
      return true;
    case 'batch':
    case 'row':
      return false;
  }
}

/** The line that starts at byte `at` of an open file, without its newline. */
async function readLineAt(handle: FileHandle, at: number): Promise<string> {
  const chunks: Buffer[] = [];
  for (let pos = at; ;) {
    const buf = Buffer.alloc(16 * 1024);
    const { bytesRead } = await handle.read(buf, 0, buf.length, pos);
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl !== -1 || bytesRead === 0) {
      chunks.push(buf.subarray(0, nl === -1 ? bytesRead : nl));
      return Buffer.concat(chunks).toString('utf8');
    }
    chunks.push(buf.subarray(0, bytesRead));
    pos += bytesRead;
  }
}

/** One {@link LedgerKeyIndex} per file for the whole process. */
const indexes = new Map<string, LedgerKeyIndex>();

/** The process's key index of `file`, brought up to date. */
export async function ledgerKeyIndex(file: string): Promise<LedgerKeyIndex> {
  const resolved = path.resolve(file);
  let index = indexes.get(resolved);
  if (!index) {
    index = new LedgerKeyIndex(resolved);
    indexes.set(resolved, index);
  }
  return index.refresh();
}

/** A fresh view of `file` (not shared): for a command that reads a ledger once. */
export async function readLedgerOnce(file: string): Promise<LedgerView> {
  return new LedgerView(path.resolve(file)).refresh();
}

/**
 * The record of a row the ledger knows, for a row whose own record was never written (its workflow was terminated,
 * or forgotten before anyone read it): built from its keys, each as far as it is known. Never a guess in the paying
 * direction: a key with no known end is `unknown`, and the row is `unknown` if any key may hold money.
 */
export function recordFromLedger(row: LedgerRow, prompt: string, model: string, line?: number): RowRecord {
  if (row.record) return row.record;
  const keys: KeyRecord[] = row.keys.map((k, i) => ({
    attempt: i + 1,
    idempotencyKey: k.idempotencyKey,
    outcome: k.ended?.outcome ?? (k.creationId ? KeyOutcome.Accepted : KeyOutcome.Unknown),
    ...(k.creationId ? { creationId: k.creationId } : {}),
    ...(k.costUsd === undefined ? {} : { chargedUsd: k.costUsd, priceSource: 'creation' as const }),
    ...(k.ended?.outcome === KeyOutcome.Failed && k.costUsd !== undefined ? { refundedUsd: k.costUsd } : {}),
    ...(k.ended?.error ? { error: k.ended.error } : {}),
  }));
  const last = row.keys.at(-1);
  const images = last?.ended?.outcome === KeyOutcome.Succeeded ? (last.ended.images ?? []) : [];
  const paid = row.keys.some(keyMayHoldMoney);
  const state =
    last?.ended?.outcome === KeyOutcome.Succeeded && images.length > 0
      ? RowState.Succeeded
      : paid
        ? RowState.Unknown
        : RowState.Failed;
  return {
    batchId: row.batchId,
    rowId: row.rowId,
    ...(line === undefined ? {} : { line }),
    state,
    prompt,
    model,
    keys,
    creationIds: keys.flatMap((k) => (k.creationId ? [k.creationId] : [])),
    images,
    ...rowMoney(keys),
    ...(state === RowState.Succeeded
      ? {}
      : {
          error:
            last?.ended?.error ??
            "the row's record was never written (its workflow was terminated or forgotten); rebuilt from the ledger",
        }),
    resubmittable: !paid && state === RowState.Failed,
  };
}

/**
 * A row's record, unless the ledger knows a key of the row that may hold money and the record does not list it (a
 * row run again after Temporal forgot it, with fewer attempts, gave up before the key that was paid): then the record
 * rebuilt from the ledger's keys, which says `unknown` unless the last of them succeeded with its images. Never a
 * record that would let a paid row be submitted again.
 */
export function recordAgainstLedger(record: RowRecord, known: LedgerRow): RowRecord {
  const listed = new Set(record.keys.map((k) => k.idempotencyKey));
  const missing = known.keys.some((k) => keyMayHoldMoney(k) && !listed.has(k.idempotencyKey));
  if (!missing) return record;
  const { record: _own, recordBy: _by, ...keysOnly } = known;
  return recordFromLedger(keysOnly, record.prompt, record.model, record.line);
}

/** Since when the service may hold a key (see {@link LedgerKey.mayBeStoredSinceMs}), counting a send cut off. */
export function keyMayBeStoredSince(key: LedgerKey): number | undefined {
  return key.mayBeStoredSinceMs ?? key.pendingSinceMs;
}
