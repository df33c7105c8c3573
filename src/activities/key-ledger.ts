import { ApplicationFailure } from '@temporalio/common';
import type { FailureOutcome } from '../api/classify';

import { requestBody, type Logger } from '../api/client';
import { RequestShapeError } from '../api/request-shape';
import type { ServiceConfig } from '../config/service-config';
import {
  FailureType,
  handledFailure,
  KeyOutcome,
  type CreateImageInput,
  type CreateImageResult,
  type KeyProgress,
  type ReusedFrom,
  type SubmitCreationResult,
} from '../model';
import { claimRow, scheduleDirOf } from '../ledger/claims';
import {
  importJsonlLedger,
  keyMayBeStoredSince,
  requestPrint,
  type Fingerprinter,
  type LedgerKey,
  type LedgerStore,
  type RequestPrint,
} from '../ledger';
import { formatWait } from '../model';
import { toApplicationFailure } from './failures';
import { allSaved, copyImages } from './saved-images';

/**
 * The ledger store's rules as a key's activity applies them: what is asked before a key is sent (the key itself,
 * an earlier request of the same fingerprint that serves the row, or a send written ahead), and what each answer
 * writes. Every write is committed before what it announces happens.
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

/**
 * A request's fingerprint as this worker sends it: the submit address and the exact body bytes, shaped by the
 * settings (field names, template). A RequestShapeError when the settings cannot shape it.
 */
export function requestFingerprinter(config: ServiceConfig): Fingerprinter {
  const target = `${config.baseUrl}${config.submitPath}`;
  return (request) => requestPrint(target, JSON.stringify(requestBody(request, config)));
}

/**
 * Refuses (a Config failure, non-retryable) work for a command or batch that reads another store than this worker's:
 * two memories of what was paid. `whose` says whose store it is ("batch b was started on", "the command reads").
 */
export function refuseOtherStore(store: LedgerStore, storeId: string | undefined, whose: string): void {
  if (!storeId || storeId === store.id) return;
  throw toApplicationFailure({
    kind: 'config',
    message:
      `this worker's ledger store ${store.location} is not the one ${whose}: two memories of what was paid; give ` +
      'the worker and the commands one IMAGEBATCH_LEDGER',
  });
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

export function createKeyLedger(deps: KeyLedgerDeps) {
  const { store } = deps;
  /** Output folders whose `ledger.jsonl` of an earlier version was imported by this process. */
  const imported = new Set<string>();
  const fail = (outcome: FailureOutcome): never => {
    throw toApplicationFailure(outcome);
  };
  const keyIds = (input: CreateImageInput) => ({
    batchId: input.batchId,
    rowId: input.rowId,
    idempotencyKey: input.idempotencyKey,
  });

  /**
   * Before anything is sent for the key: the store's decision. A key known before is answered from what is known of
   * it (its end, its creation) or sent again with the same body while the service's idempotency window still holds
   * it; one sent longer ago with no known answer, or with another body, is never sent again.
   */
  async function consult(input: CreateImageInput, outDir: string): Promise<Consult> {
    refuseOtherStore(store, input.ledger?.storeId, `batch ${input.batchId} was started on (resume it once fixed)`);
    await importOnce(outDir);
    let print: RequestPrint;
    try {
      print = deps.fingerprintOf(input.request);
    } catch (err) {
      if (err instanceof RequestShapeError) return fail({ kind: 'config', message: err.message });
      throw err;
    }
    // A run of a schedule sends a row only while it holds the row's claim: two overlapping runs never both pay.
    if (!(await store.key(input.idempotencyKey))) {
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
    const decision = await store.decide(
      {
        ...keyIds(input),
        request: input.request,
        ...print,
        outDir,
        reuse: input.ledger?.newImages !== true,
      },
      deps.now(),
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
        return known(input, outDir, decision.key, print);
    }
  }

  async function known(
    input: CreateImageInput,
    outDir: string,
    past: LedgerKey,
    print: RequestPrint,
  ): Promise<Consult> {
    const refuse = (why: string): never =>
      fail({ kind: 'unknown', details: { idempotencyKey: input.idempotencyKey, tries: 0, lastError: why } });
    if (past.requestSha256 !== print.requestSha256) {
      return refuse(
        `the ledger store ${store.location} shows key ${input.idempotencyKey} sent with another request at ` +
          `${new Date(past.firstSentAtMs).toISOString()}; not sent with this one (resolve it with imagebatch reconcile)`,
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
        await sending(input, outDir, print);
        return { kind: 'send' };
      case undefined:
      case KeyOutcome.Submitting:
      case KeyOutcome.Accepted:
      case KeyOutcome.Unknown:
      case KeyOutcome.Lost:
      case KeyOutcome.TimedOut:
        break;
    }
    if (past.creationId) return { kind: 'follow', creationId: past.creationId, ...cost };
    // The window runs from the first send the service may have stored (429, 401 and 403 store nothing).
    const since = keyMayBeStoredSince(past);
    if (since !== undefined && deps.now() - since > deps.idempotencyWindowMs) {
      return refuse(
        `key ${input.idempotencyKey} was sent at ${new Date(since).toISOString()} and its answer is not known; ` +
          `the service's idempotency window (${formatWait(deps.idempotencyWindowMs)}, ` +
          'IMAGEGEN_IDEMPOTENCY_WINDOW_MS) has passed, so sending it again could be charged as a new creation: ' +
          'it is reported, never sent again',
      );
    }
    await sending(input, outDir, print);
    return { kind: 'send' };
  }

  /** Another send of a key known before, written ahead of it. */
  async function sending(input: CreateImageInput, outDir: string, print: RequestPrint): Promise<void> {
    await store.append([{ type: 'sending', ...keyIds(input), request: input.request, ...print, outDir }], deps.now());
  }

  /** The `ledger.jsonl` of an earlier version in the output folder, taken into the store once per process. */
  async function importOnce(outDir: string): Promise<void> {
    if (imported.has(outDir)) return;
    const result = await importJsonlLedger(store, outDir, deps.fingerprintOf);
    imported.add(outDir);
    if (result.events > 0 || result.unreadable > 0) {
      deps.logger.info('imported the ledger.jsonl of an earlier version into the ledger store', {
        outDir,
        events: result.events,
        unreadable: result.unreadable,
      });
    }
  }

  /**
   * What a submission's failed answer says of the key: stored nothing (429, 401, 403, a local hold, the worker's own
   * configuration, a send that never left), or maybe stored (no answer that can be read). An answer that ends the key
   * is {@link recordEnd}'s. Returns the failure to throw: a key that ends `not_sent` here, but that an earlier send
   * (another run) may have reached, ends unknown instead.
   */
  async function noteAnswer(input: CreateImageInput, err: unknown): Promise<unknown> {
    if (!(err instanceof ApplicationFailure)) return err;
    const status = asRecord(err.details?.[0]).httpStatus;
    const notSent = err.type === FailureType.Unreachable || err.type === FailureType.NotSent;
    const unseen =
      notSent ||
      err.type === FailureType.RateLimited ||
      err.type === FailureType.Config ||
      (err.type === FailureType.BatchStop && status !== 402);
    const ambiguous = !err.nonRetryable && (err.type === FailureType.Ambiguous || err.type === FailureType.Malformed);
    if (unseen || ambiguous) {
      await store.append([{ type: unseen ? 'unseen' : 'ambiguous', ...keyIds(input) }], deps.now());
    }
    if (err.type !== FailureType.NotSent) return err;
    const known = await store.key(input.idempotencyKey);
    if (!known || (known.creationId === undefined && keyMayBeStoredSince(known) === undefined)) return err;
    const details = asRecord(err.details?.[0]);
    return toApplicationFailure({
      kind: 'unknown',
      details: {
        idempotencyKey: input.idempotencyKey,
        tries: typeof details.tries === 'number' && details.tries > 0 ? details.tries : 1,
        lastError: `${typeof details.lastError === 'string' ? details.lastError : err.message}; an earlier send of the key may have reached the service`,
      },
    });
  }

  /** The service accepted the key: a creation exists, and it was charged. */
  async function accepted(input: CreateImageInput, result: SubmitCreationResult): Promise<void> {
    const cost = result.costUsd === undefined ? {} : { costUsd: result.costUsd };
    await store.append([{ type: 'accepted', ...keyIds(input), creationId: result.creationId, ...cost }], deps.now());
  }

  /** The key's end, when its creation ended. */
  async function ended(input: CreateImageInput, result: CreateImageResult): Promise<void> {
    if (result.outcome === 'reused') return; // nothing was sent for the key
    const cost = result.costUsd === undefined ? {} : { costUsd: result.costUsd };
    await store.append(
      [
        result.outcome === 'succeeded'
          ? {
              type: 'ended',
              ...keyIds(input),
              outcome: KeyOutcome.Succeeded,
              creationId: result.creationId,
              ...cost,
              images: result.images,
            }
          : {
              type: 'ended',
              ...keyIds(input),
              outcome: KeyOutcome.Failed,
              creationId: result.creationId,
              ...cost,
              error: result.error,
              retryable: result.retryable,
            },
      ],
      deps.now(),
    );
  }

  /** A failure that ends the key (one that is tried again, or a batch stop, ends nothing). */
  async function recordEnd(input: CreateImageInput, err: unknown, known: KeyProgress): Promise<void> {
    if (!(err instanceof ApplicationFailure) || !err.nonRetryable) return;
    // Answered or refused by the store itself (a refusal is an Unknown of 0 tries): nothing new to write.
    const first = asRecord(err.details?.[0]);
    if (first.code === 'LEDGER' || (err.type === FailureType.Unknown && first.tries === 0)) return;
    const outcome = keyOutcomeOfFailure(err, known);
    if (!outcome) return;
    await store
      .append(
        [
          {
            type: 'ended',
            ...keyIds(input),
            outcome,
            ...(known.creationId ? { creationId: known.creationId } : {}),
            ...(known.costUsd === undefined ? {} : { costUsd: known.costUsd }),
            error: err.message,
          },
        ],
        deps.now(),
      )
      .catch(() => undefined); // the failure itself matters more; the key's sending is in the store
  }

  return { consult, noteAnswer, accepted, ended, recordEnd };
}

/** The key outcome a non-retryable failure of createImage stands for, if it ends the key. */
function keyOutcomeOfFailure(err: ApplicationFailure, known: KeyProgress): KeyOutcome | undefined {
  switch (handledFailure(err.type)) {
    case FailureType.Refunded:
      return KeyOutcome.Refunded;
    case FailureType.Rejected:
      return KeyOutcome.Rejected;
    case FailureType.Unknown:
      return known.creationId ? undefined : KeyOutcome.Unknown;
    case FailureType.NotSent:
      return known.creationId ? undefined : KeyOutcome.NotSent;
    case FailureType.CreationNotFound:
      return KeyOutcome.Lost;
    case FailureType.MaxWait:
      return KeyOutcome.TimedOut;
    case FailureType.DownloadFailed:
      return KeyOutcome.Succeeded; // generated, images not saved: no images listed
    case FailureType.BatchStop:
      return asRecord(err.details?.[0]).httpStatus === 402 && !known.creationId ? KeyOutcome.Declined : undefined;
    case FailureType.Config:
    case undefined:
      return undefined;
  }
}

export function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
