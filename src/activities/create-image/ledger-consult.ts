import type { FailureOutcome } from '../../api/classify';
import type { Logger } from '../../api/client';
import { RequestShapeError } from '../../api/request-shape';
import { formatWait, KeyOutcome, type CreateImageInput, type CreateImageResult, type ReusedFrom } from '../../model';
import { claimRow, scheduleDirOf } from '../../ledger/claims';
import {
  importJsonlLedger,
  keyMayBeStoredSince,
  type Fingerprinter,
  type LedgerKey,
  type LedgerStore,
  type RequestPrint,
} from '../../ledger';
import { toApplicationFailure } from '../failures';
import { refuseOtherBatchStore } from '../key-ledger';
import { allSaved, copyImages } from '../saved-images';

/**
 * The ledger store's rules as a key's activity applies them before it sends: the key itself, an earlier request of
 * the same fingerprint that serves the row, or a send written ahead (what each answer writes: ledger-writes.ts).
 * Every write is committed before what it announces happens.
 */

export interface KeyLedgerDeps {
  store: LedgerStore;
  /** The print of a request as this worker would send it (service address and body bytes). */
  fingerprintOf: Fingerprinter;
  /** The service's idempotency window: a key with no known answer is sent again only within it. */
  idempotencyWindowMs: number;
  now: () => number;
  logger: Logger;
}

/** The store's rules of one process: its dependencies, and the output folders whose old ledger it imported. */
export interface KeyLedger extends KeyLedgerDeps {
  /** Output folders whose `ledger.jsonl` of an earlier version was imported by this process. */
  readonly imported: Set<string>;
}

export function keyLedger(deps: KeyLedgerDeps): KeyLedger {
  return { ...deps, imported: new Set<string>() };
}

/** What the store says before a key is sent. */
export type Consult =
  | { kind: 'send' }
  /** The key was accepted before (an earlier run of the row, forgotten by Temporal): followed, never sent again. */
  | { kind: 'follow'; creationId: string; costUsd?: number }
  /** The key ended before: its end, with no request. */
  | { kind: 'answer'; result: CreateImageResult }
  /** An earlier request with the same fingerprint serves the row: nothing is sent for the key. */
  | { kind: 'reuse'; source: LedgerKey; from: ReusedFrom };

const fail = (outcome: FailureOutcome): never => {
  throw toApplicationFailure(outcome);
};

/** The ids that name a key in the store. */
export const keyIds = (input: CreateImageInput) => ({
  batchId: input.batchId,
  rowId: input.rowId,
  idempotencyKey: input.idempotencyKey,
});

/**
 * Before anything is sent for the key: the store's decision. A key known before is answered from what is known of
 * it (its end, its creation) or sent again with the same body while the service's idempotency window still holds
 * it; one sent longer ago with no known answer, or with another body, is never sent again.
 */
export async function consult(keys: KeyLedger, input: CreateImageInput, outDir: string): Promise<Consult> {
  await refuseOtherBatchStore(keys.store, input.ledger, input.batchId);
  await importOnce(keys, outDir);
  let print: RequestPrint;
  try {
    print = keys.fingerprintOf(input.request);
  } catch (err) {
    if (err instanceof RequestShapeError) return fail({ kind: 'config', message: err.message });
    throw err;
  }
  // A run of a schedule sends a row only while it holds its request's claim: two overlapping runs never both pay.
  if (!(await keys.store.key(input.idempotencyKey))) {
    const scheduleDir = await scheduleDirOf(outDir);
    const owner = { batchId: input.batchId, rowId: input.rowId };
    const claim = scheduleDir ? await claimRow(scheduleDir, print.fingerprint, owner) : { ok: true as const };
    if (!claim.ok) {
      return fail({
        kind: 'rejected',
        details: {
          httpStatus: 0,
          code: 'LEDGER',
          message: `the same request is being run by row ${claim.owner.rowId} of ${claim.owner.batchId}, another run of this schedule: not sent here`,
          fieldErrors: [],
        },
      });
    }
  }
  const decision = await keys.store.decide(
    {
      ...keyIds(input),
      request: input.request,
      ...print,
      outDir,
      reuse: input.ledger?.newImages !== true,
    },
    keys.now(),
  );
  switch (decision.kind) {
    case 'send':
      return { kind: 'send' };
    case 'reuse': {
      const { source } = decision;
      const from: ReusedFrom = {
        batchId: source.batchId,
        rowId: source.rowId,
        idempotencyKey: source.idempotencyKey,
        ...(source.creationId ? { creationId: source.creationId } : {}),
      };
      return { kind: 'reuse', source, from };
    }
    case 'known':
      return known(keys, input, outDir, decision.key, print);
  }
}

async function known(
  keys: KeyLedger,
  input: CreateImageInput,
  outDir: string,
  past: LedgerKey,
  print: RequestPrint,
): Promise<Consult> {
  const refuse = (why: string): never =>
    fail({ kind: 'unknown', details: { idempotencyKey: input.idempotencyKey, tries: 0, lastError: why } });
  if (past.requestSha256 !== print.requestSha256) {
    return refuse(
      `the ledger store ${keys.store.location} shows key ${input.idempotencyKey} sent at ` +
        `${new Date(past.firstSentAtMs).toISOString()} with another body or with the key elsewhere ` +
        '(IMAGEGEN_REQUEST_FIELDS, IMAGEGEN_REQUEST_TEMPLATE, IMAGEGEN_IDEMPOTENCY_HEADER, IMAGEGEN_IDEMPOTENCY_FIELD); ' +
        'not sent again: put those settings back, then resolve it with imagebatch reconcile',
    );
  }
  const end = past.ended;
  const cost = past.costUsd === undefined ? {} : { costUsd: past.costUsd };
  switch (end?.outcome) {
    case KeyOutcome.Succeeded: {
      if (!end.images?.length || !past.creationId) break;
      // Its images where they were saved, or copied from there into this output folder (the same batch run
      // again from another folder); else its creation is followed and they are fetched again.
      const images =
        (past.outDir ?? outDir) === outDir
          ? (await allSaved(outDir, end.images))
            ? end.images
            : undefined
          : await copyImages(past, outDir, input.rowId);
      if (images)
        return { kind: 'answer', result: { outcome: 'succeeded', creationId: past.creationId, ...cost, images } };
      break;
    }
    case KeyOutcome.Failed:
      if (past.creationId) {
        return {
          kind: 'answer',
          result: {
            outcome: 'failed',
            creationId: past.creationId,
            ...cost,
            error: end.error ?? 'failed',
            retryable: end.retryable ?? false,
          },
        };
      }
      break;
    case KeyOutcome.Refunded:
      return fail({
        kind: 'refunded',
        details: { httpStatus: 0, code: 'LEDGER', message: `${end.error ?? 'refunded'} (from the ledger)` },
      });
    case KeyOutcome.Rejected:
      return fail({
        kind: 'rejected',
        details: {
          httpStatus: 0,
          code: 'LEDGER',
          message: `${end.error ?? 'rejected'} (from the ledger)`,
          fieldErrors: [],
        },
      });
    case KeyOutcome.Declined:
    case KeyOutcome.NotSent:
      // Judged and not charged, or never seen: sending it again is a fresh request.
      await sending(keys, input, outDir, print);
      return { kind: 'send' };
    case undefined:
    case KeyOutcome.Submitting:
    case KeyOutcome.Accepted:
    case KeyOutcome.Unknown:
    case KeyOutcome.Lost:
    case KeyOutcome.TimedOut:
    case KeyOutcome.Duplicate: // a second creation's own entry, never sent as a key
      break;
  }
  if (past.creationId) return { kind: 'follow', creationId: past.creationId, ...cost };
  // The window runs from the first send the service may have stored (429, 401 and 403 store nothing).
  const since = keyMayBeStoredSince(past);
  if (since !== undefined && keys.now() - since > keys.idempotencyWindowMs) {
    return refuse(
      `key ${input.idempotencyKey} was sent at ${new Date(since).toISOString()} and its answer is not known; ` +
        `the service's idempotency window (${formatWait(keys.idempotencyWindowMs)}, ` +
        'IMAGEGEN_IDEMPOTENCY_WINDOW_MS) has passed, so sending it again could be charged as a new creation: ' +
        'it is reported, never sent again',
    );
  }
  await sending(keys, input, outDir, print);
  return { kind: 'send' };
}

/** Another send of a key known before, written ahead of it. */
export async function sending(
  keys: KeyLedger,
  input: CreateImageInput,
  outDir: string,
  print: RequestPrint,
): Promise<void> {
  await keys.store.append(
    [{ type: 'sending', ...keyIds(input), request: input.request, ...print, outDir }],
    keys.now(),
  );
}

/** The `ledger.jsonl` of an earlier version in the output folder, taken into the store once per process. */
async function importOnce(keys: KeyLedger, outDir: string): Promise<void> {
  if (keys.imported.has(outDir)) return;
  const result = await importJsonlLedger(keys.store, outDir, keys.fingerprintOf);
  keys.imported.add(outDir);
  if (result.events > 0 || result.unreadable > 0) {
    keys.logger.info('imported the ledger.jsonl of an earlier version into the ledger store', {
      outDir,
      events: result.events,
      unreadable: result.unreadable,
    });
  }
}
