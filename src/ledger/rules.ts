import {
  duplicateKeyOf,
  KeyOutcome,
  NO_MONEY_HELD,
  rowMoney,
  RowState,
  type KeyRecord,
  type RowRecord,
} from '../model';
import type { KeyEvent, LedgerKey, LedgerRow } from './events';

/**
 * The ledger's rules, with no storage in them: how a key's events fold into what is known of it, whether a key or a
 * row may hold money, and a row's record rebuilt from its keys. Every store applies them alike.
 */

/** Whether a key may hold money: sent with no known end, accepted, or ended in anything but a refusal or refund. */
export function keyMayHoldMoney(key: LedgerKey): boolean {
  return !key.ended || !NO_MONEY_HELD.has(key.ended.outcome);
}

/** Whether a row may have been paid for: any key of it may hold money, whatever its record says. */
export function rowMayBePaid(row: LedgerRow): boolean {
  return row.keys.some(keyMayHoldMoney) || (row.record?.keys ?? []).some((k) => !NO_MONEY_HELD.has(k.outcome));
}

/**
 * Folds one event of a key into what is known of it (`known` is undefined before its first `sending`). Undefined for
 * an event of a key never sent (an orphan: its `sending` line was lost), which a reader counts as unreadable.
 */
export function foldKey(known: LedgerKey | undefined, event: KeyEvent): LedgerKey | undefined {
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
        fingerprint: event.fingerprint,
        ...(event.outDir === undefined ? {} : { outDir: event.outDir }),
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
  const listed = new Set(record.keys.map(ledgerKeyOf));
  const missing = known.keys.some((k) => keyMayHoldMoney(k) && !listed.has(k.idempotencyKey));
  if (!missing) return record;
  const { record: _own, recordBy: _by, ...keysOnly } = known;
  return recordFromLedger(keysOnly, record.prompt, record.model, record.line);
}

/**
 * The id under which the store keeps a key of a row's record: its idempotency key, or for a second creation a check of
 * the key paid for (`duplicate`), that creation's own entry.
 */
export function ledgerKeyOf(key: Pick<KeyRecord, 'idempotencyKey' | 'outcome' | 'creationId'>): string {
  return key.outcome === KeyOutcome.Duplicate && key.creationId
    ? duplicateKeyOf(key.idempotencyKey, key.creationId)
    : key.idempotencyKey;
}

/** A key the row could only call unknown: it was out (submitting or unknown) when the row ended. */
export function keyLeftOpen(key: Pick<KeyRecord, 'outcome'>): boolean {
  return key.outcome === KeyOutcome.Unknown || key.outcome === KeyOutcome.Submitting;
}

/** Since when the service may hold a key (see {@link LedgerKey.mayBeStoredSinceMs}), counting a send cut off. */
export function keyMayBeStoredSince(key: LedgerKey): number | undefined {
  return key.mayBeStoredSinceMs ?? key.pendingSinceMs;
}

/**
 * A row's record whose keys the row could only call unknown (it was cancelled, or broke, while a key was out) put
 * right by what the store knows of them: a key the store never heard of (write-ahead: nothing left), one that ended
 * `not_sent`, or one no send of which may be stored at the service (none reached it, or each was refused before it
 * was), was not charged. Undefined when nothing changes.
 */
export function recordWithUnsentKeys(
  record: RowRecord,
  known: ReadonlyMap<string, LedgerKey | undefined>,
): RowRecord | undefined {
  let changed = false;
  const keys = record.keys.map((key): KeyRecord => {
    if (!keyLeftOpen(key) || key.creationId) return key;
    const stored = known.get(key.idempotencyKey);
    const unsent =
      stored === undefined ||
      stored.ended?.outcome === KeyOutcome.NotSent ||
      (!stored.ended && !stored.creationId && keyMayBeStoredSince(stored) === undefined);
    if (!unsent) return key;
    changed = true;
    const { chargedUsd: _c, priceSource: _p, ...rest } = key;
    return {
      ...rest,
      outcome: KeyOutcome.NotSent,
      error: `${key.error ?? 'ended'}; no send of it can have been stored`,
    };
  });
  if (!changed) return undefined;
  const free = keys.every((k) => NO_MONEY_HELD.has(k.outcome));
  const state = record.state === RowState.Unknown && free ? RowState.Failed : record.state;
  const open = state === RowState.Failed || state === RowState.Cancelled || state === RowState.NotRun;
  return { ...record, keys, state, ...rowMoney(keys), resubmittable: record.resubmittable || (open && free) };
}

/**
 * A cancelled row's record whose key the row could only call unknown (its creation's id went with the cancelled
 * activity), put right by the creation the store knows the key received: accepted, charged, with that creation's id,
 * and its cost when the service showed it. Undefined when nothing changes.
 */
export function recordWithStoredCreations(
  record: RowRecord,
  known: ReadonlyMap<string, LedgerKey | undefined>,
): RowRecord | undefined {
  if (record.state !== RowState.Cancelled) return undefined;
  const found: string[] = [];
  const keys = record.keys.map((key): KeyRecord => {
    if (!keyLeftOpen(key) || key.creationId) return key;
    const stored = known.get(key.idempotencyKey);
    if (!stored?.creationId) return key;
    found.push(stored.creationId);
    const { error: _e, ...rest } = key;
    return {
      ...rest,
      outcome: KeyOutcome.Accepted,
      creationId: stored.creationId,
      ...(stored.costUsd === undefined ? {} : { chargedUsd: stored.costUsd, priceSource: 'creation' as const }),
    };
  });
  if (found.length === 0) return undefined;
  const creationIds = [...record.creationIds, ...found.filter((id) => !record.creationIds.includes(id))];
  return { ...record, keys, creationIds, ...rowMoney(keys) };
}
