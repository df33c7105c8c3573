import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import type { FailureOutcome } from '../api/classify';
import {
  BatchStopReason,
  FailureType,
  KeyOutcome,
  NO_MONEY_HELD,
  type BindingLimit,
  type CreateImageInput,
  type CreateImageResult,
  type DownloadedImage,
  type DownloadImagesInput,
  type KeyProgress,
  type ModelInfo,
  type PollCreationInput,
  type PollCreationResult,
  type SubmitCreationInput,
  type SubmitCreationResult,
} from '../model';
import { lazyClient, LocalHoldCode, type ClientOutcome, type Logger } from '../api/client';
import type { HoldRegistry } from '../api/holds';
import type { HeldBy, PollPlan, PollRegime, ThrottleSignal } from '../api/poll-plan';
import { ErrorCode } from '../api/contract';
import type { ApiKeyProvider } from '../api/api-key';
import type { ServiceConfig } from '../config/service-config';
import type { Fingerprinter, LedgerKey, LedgerStore } from '../ledger';
import { formatWait } from '../model';
import { clipSource, describeImageUrl, downloadImages, guardedDownloadDispatcher } from './download';
import { imagesRefusedStop } from './images-refused';
import { redactedFailure } from './redacted-failure';
import { checkImageCount, creationByteBudget, noImageFailure } from './image-limits';
import { failureWith, toApplicationFailure } from './failures';
import { currentDetails, heartbeat, whileHeartbeating } from './heartbeat';
import { asRecord, createKeyLedger, type Consult } from './key-ledger';
import { copyImages } from './saved-images';

/**
 * The image-service activities. Each attempt sends at most one request to the service; every wait (Retry-After,
 * the poll interval, backoff after an unknown outcome) is the activity's next retry, through `nextRetryDelay`.
 * While a request or a download is in flight the activity heartbeats (see heartbeat.ts), so that the short
 * heartbeat timeouts of the workflows notice a dead worker within seconds.
 */

export interface ImageActivityDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  dispatcher?: Dispatcher;
  downloadDispatcher?: Dispatcher;
  outputRoot: string;
  now: () => number;
  logger: Logger;
  holds?: HoldRegistry;
  /** When to poll: learnt from this process's creations, per model (see poll-plan.ts). */
  pollPlan: PollPlan;
  /** Whether the task queue has a rate limit: then a late first attempt means the key's rate binds. */
  taskQueueRateLimited: boolean;
  /** Jitter source in [0, 1). */
  random: () => number;
  /** The ledger store: what was asked and paid, shared by every worker and command of the deployment. */
  ledger: LedgerStore;
  /** The print of a request as this worker sends it (see requestFingerprinter). */
  fingerprintOf: Fingerprinter;
}

/**
 * Consecutive poll answers 404 without the service's ERR_NOT_FOUND code after which a key stops its batch: such a
 * run says the address is wrong (IMAGEGEN_CREATION_PATH, a proxy), not that the creation is lost.
 */
export const UNRECOGNIZED_NOT_FOUND_LIMIT = 5;

/**
 * How late a key's first attempt may start after it was scheduled before the poll plan takes the task queue's rate
 * limit as binding: well above a worker's ordinary pick-up time, below the wait of a queue the limiter holds back.
 */
export const QUEUE_LAG_MS = 1_000;

/** A submission that the key's pace (or quota gate) held back this recently says that the key's rate (quota) binds. */
const HELD_LATELY_MS = 1_000;

/**
 * What a submission held back tells the plan: a 429 of the service, or this worker's own pace or quota gate holding
 * it (as does a 429 that answered the worker's probe above what it had learnt).
 */
function throttleOf(code: string, probe: boolean): ThrottleSignal {
  switch (code) {
    case ErrorCode.QuotaExceeded:
      return probe ? 'gated' : 'quota_exceeded';
    case ErrorCode.RateLimit:
      return probe ? 'paced' : 'rate_limited';
    case LocalHoldCode.Quota:
      return 'gated';
    case LocalHoldCode.Rate:
      return 'paced';
    default:
      return 'rate_limited';
  }
}

/** What the worker's log says when what holds keys back changes. */
const HELD_TEXT: Readonly<Record<HeldBy | 'busy', string>> = {
  open: 'no limit holds keys back',
  rate: "the key's request rate binds (429)",
  concurrency: "the account's quota of creations in flight binds (429)",
  queue: "the key's request rate binds (keys wait in the task queue for its rate limit, IMAGEBATCH_RATE_LIMIT)",
  busy: "keys wait in Temporal's task queue: every worker is busy",
};
/** ...and, when learning, how creations are polled then. */
const POLLS_TEXT: Readonly<Record<PollRegime, string>> = {
  open: 'creations are polled early',
  rate: 'creations are polled late, when they are likely to have ended',
  concurrency: 'creations are polled early',
};

/** The longest last answer a key that ran out of time carries to its row's record. */
const MAX_LAST_ANSWER_CHARS = 500;

export function createImageActivities(deps: ImageActivityDeps) {
  // The plan always tells which limit binds (rows report it to their batch); it times polls only when learning.
  const limits = deps.pollPlan;
  const plan = deps.config.pollPlan === 'learn' ? limits : undefined;
  /** What held keys back when last told to the log: a change is worth a line. */
  let told: HeldBy | 'busy' = 'open';
  let downloadDispatcher: Dispatcher | undefined = deps.downloadDispatcher;
  const keys = createKeyLedger({
    store: deps.ledger,
    fingerprintOf: deps.fingerprintOf,
    idempotencyWindowMs: deps.config.idempotencyWindowMs,
    now: deps.now,
    logger: deps.logger,
  });
  const api = lazyClient(deps);

  /** Exponential backoff with jitter (half to full), for the n-th consecutive unknown outcome. */
  function backoffMs(n: number): number {
    const { backoffBaseMs, backoffMaxMs } = deps.config;
    const ceiling = Math.min(backoffMaxMs, backoffBaseMs * 2 ** Math.min(Math.max(n - 1, 0), 30));
    return Math.round(ceiling / 2 + (deps.random() * ceiling) / 2);
  }

  /** Consecutive transient failures so far, from this attempt's or the previous attempts' heartbeat details. */
  function priorTries(): number {
    return countOf(asRecord(currentDetails(Context.current())).ambiguousTries);
  }

  /** Heartbeats the details so far with `patch` over them: each field is kept until something changes it. */
  function note(ctx: Context, patch: Partial<KeyProgress>): void {
    heartbeat(ctx, { ...asRecord(currentDetails(ctx)), ...patch });
  }

  function fail(outcome: FailureOutcome, retryDelayMs?: number): never {
    throw toApplicationFailure(outcome, retryDelayMs);
  }

  /** One GET of a creation: its end, or a failure that makes the activity try again later. */
  async function pollOnce(
    input: PollCreationInput,
    inFlightDelayMs: () => number = () => api().pollIntervalMs(),
  ): Promise<PollCreationResult> {
    const ctx = Context.current();
    const prior = priorTries();
    const outcome = await whileHeartbeating(ctx, api().getCreation(input.creationId, ctx.cancellationSignal));
    const transient = (o: FailureOutcome): never => {
      note(ctx, { ambiguousTries: prior + 1 });
      return fail(o, backoffMs(prior + 1));
    };
    const transientKind = outcome.kind === 'ambiguous' || outcome.kind === 'notSent' || outcome.kind === 'malformed';
    if (prior > 0 && !transientKind) note(ctx, { ambiguousTries: 0 });
    switch (outcome.kind) {
      case 'ended':
        return outcome.result;
      case 'inFlight':
        return fail(outcome, inFlightDelayMs());
      case 'ambiguous':
      case 'notSent':
      case 'malformed':
        return transient(outcome);
      case 'rateLimited':
      case 'notFound':
      case 'batchStop':
      case 'config':
      case 'refunded':
      case 'rejected':
        return fail(outcome);
      case 'accepted':
      case 'models':
        return transient({ kind: 'malformed', lastError: `unexpected ${outcome.kind} answer to a poll` });
    }
  }

  /** Downloads `input`'s images; `maxTotalBytes` is a creation's byte budget (see image-limits.ts). */
  async function download(input: DownloadImagesInput, maxTotalBytes?: number): Promise<DownloadedImage[]> {
    const ctx = Context.current();
    downloadDispatcher ??= guardedDownloadDispatcher(deps.config);
    const work = downloadImages(input, {
      dispatcher: downloadDispatcher,
      outputRoot: deps.outputRoot,
      maxBytes: deps.config.maxDownloadBytes,
      ...(maxTotalBytes === undefined ? {} : { maxTotalBytes }),
      requestTimeoutMs: deps.config.requestTimeoutMs,
      maxRedirects: deps.config.downloadMaxRedirects,
      headersTimeoutMs: deps.config.headersTimeoutMs,
      bodyTimeoutMs: deps.config.bodyTimeoutMs,
      defaultRetryAfterMs: deps.config.defaultRetryAfterMs,
      now: deps.now,
      // Progress joins the details already there (the count of unknown outcomes stays for the next attempt).
      progress: (p) => heartbeat(ctx, { ...asRecord(currentDetails(ctx)), download: p }),
      signal: ctx.cancellationSignal,
    });
    return whileHeartbeating(ctx, work);
  }

  /**
   * POST a creation with its idempotency key: one request. Returns the accepted creation; otherwise throws
   * RateLimited / Ambiguous (retryable, same key), Unknown (after `maxAmbiguousTries` unknown outcomes),
   * Refunded, Rejected, BatchStop or Config (non-retryable).
   */
  async function submitOnce(input: SubmitCreationInput): Promise<SubmitCreationResult> {
    const ctx = Context.current();
    const prior = priorTries();
    const outcome: ClientOutcome = await whileHeartbeating(ctx, api().submit(input, ctx.cancellationSignal));
    // A send that never left (`sent` false) is waited out like the others, and while no send of the key may have
    // left, the key ends `not_sent` rather than unknown when the tries run out.
    const ambiguous = (lastError: string, o: FailureOutcome, sent = true): never => {
      const tries = prior + 1;
      const mayBeSent = sent || keyProgressOf(currentDetails(ctx)).mayBeSent === true;
      if (tries >= deps.config.maxAmbiguousTries) {
        deps.logger.warn(
          `image api: ${mayBeSent ? 'submission outcome unknown' : 'nothing sent'}, giving up on this key`,
          {
            idempotencyKey: input.idempotencyKey,
            tries,
          },
        );
        const details = { idempotencyKey: input.idempotencyKey, tries, lastError };
        return fail(mayBeSent ? { kind: 'unknown', details } : { kind: 'keyNotSent', details });
      }
      // Durable across attempts: the next attempt reads it back from `info.heartbeatDetails`.
      note(ctx, { ambiguousTries: tries, ...(mayBeSent ? { mayBeSent: true as const } : {}) });
      return fail(o, backoffMs(tries));
    };
    switch (outcome.kind) {
      case 'accepted':
        if (api().pacedSince(deps.now() - HELD_LATELY_MS)) limits.signal('paced', deps.now());
        if (api().gatedSince(deps.now() - HELD_LATELY_MS)) limits.signal('gated', deps.now());
        return {
          creationId: outcome.creationId,
          status: outcome.status,
          ...(outcome.costUsd === undefined ? {} : { costUsd: outcome.costUsd }),
          ...(outcome.replayed === undefined ? {} : { replayed: outcome.replayed }),
        };
      case 'ambiguous':
        return ambiguous(outcome.lastError, outcome);
      case 'notSent':
        return ambiguous(outcome.lastError, outcome, false);
      case 'malformed':
        return ambiguous(outcome.lastError, { kind: 'ambiguous', lastError: outcome.lastError });
      case 'rateLimited':
        // Which limit binds decides when polls go out (poll-plan.ts). A 503's wait is neither.
        // The worker's own gate and pace, full, say the same limits bind as the 429s they keep away.
        if (outcome.httpStatus === 429 || (outcome.local === true && outcome.code !== LocalHoldCode.Wait)) {
          limits.signal(throttleOf(outcome.code, outcome.probe === true), deps.now());
        }
        return fail(outcome);
      case 'refunded':
      case 'rejected':
      case 'batchStop':
      case 'config':
        return fail(outcome);
      case 'ended':
      case 'inFlight':
      case 'models':
      case 'notFound': {
        const lastError = `unexpected ${outcome.kind} answer to a submission`;
        return ambiguous(lastError, { kind: 'ambiguous', lastError });
      }
    }
  }

  /**
   * One attempt of {@link CreateImageInput}'s key: the submission while no creation is known, else one poll (and,
   * once it succeeded, the downloads). Every failure carries what is known of the key as its second detail.
   */
  async function createImageAttempt(input: CreateImageInput, ctx: Context): Promise<CreateImageResult> {
    noteQueueLag(ctx);
    const learned = keyProgressOf(ctx.info.heartbeatDetails);
    const progress: KeyProgress = { ...input.progress, ...learned };
    if (!learned.creationId && progress.creationId) {
      // A creation known from an earlier activity (the row waited out a batch stop): its counts start afresh.
      delete progress.ambiguousTries;
      delete progress.unrecognizedNotFound;
    }
    heartbeat(ctx, progress);
    const outDir = path.resolve(deps.outputRoot, input.outDir);
    const ended = async (work: Promise<CreateImageResult>) => {
      const result = await work;
      await keys.ended(input, result);
      return result;
    };
    try {
      if (!progress.creationId) {
        const past = await keys.consult(input, outDir);
        if (past.kind === 'answer') return past.result;
        if (past.kind === 'reuse') return await reuse(input, ctx, outDir, past);
        if (past.kind === 'follow') {
          // The key was accepted before (an earlier run of the row, forgotten by Temporal): its creation is
          // followed, never submitted again.
          const known: KeyProgress = {
            creationId: past.creationId,
            acceptedAtMs: deps.now(),
            ...(past.costUsd === undefined ? {} : { costUsd: past.costUsd }),
          };
          heartbeat(ctx, known);
          return await ended(pollAndSave(input, ctx, { ...known, creationId: past.creationId }));
        }
        const accepted = await submitOnce({ idempotencyKey: input.idempotencyKey, request: input.request }).catch(
          async (err: unknown) => {
            throw await keys.noteAnswer(input, err);
          },
        );
        const ticket = plan?.begin(input.request.model);
        const known: KeyProgress = {
          creationId: accepted.creationId,
          acceptedAtMs: deps.now(),
          ...(accepted.costUsd === undefined ? {} : { costUsd: accepted.costUsd }),
          ...(ticket ? { pollExplore: ticket.explore } : {}),
        };
        heartbeat(ctx, known);
        await keys.accepted(input, accepted);
        // Accepted: the first poll goes out in the next attempt, no sooner than the poll interval (poll-plan.ts).
        throw ApplicationFailure.create({
          type: FailureType.Pending,
          message: `creation ${accepted.creationId} accepted (status ${accepted.status})`,
          nonRetryable: false,
          // Expected flow control, like every other Pending: logged at DEBUG by the SDK, not WARN.
          category: ApplicationFailureCategory.BENIGN,
          nextRetryDelay: pollDelay(input, known, 0),
          details: [{ status: accepted.status, accepted: true }],
        });
      }
      return await ended(pollAndSave(input, ctx, { ...progress, creationId: progress.creationId }));
    } catch (err) {
      const known = keyProgressOf(currentDetails(ctx));
      const failure = redactedFailure(imagesRefusedStop(err, input.batchId) ?? err, deps.apiKey);
      await keys.recordEnd(input, failure, known);
      throw withProgress(failure, known);
    }
  }

  /**
   * The row is served by an earlier request of the same fingerprint (another batch, file or run): nothing is sent
   * for its key. Its images, saved and unchanged, are copied here; else its ended creation is fetched again by its id
   * (a GET: nothing is charged). A request still in flight elsewhere is waited for, up to the row's maximum wait (then
   * its creation, if one is known, is followed here). One whose outcome is not known is reported. One that ended
   * holding nothing (refused, refunded) serves nobody: the row is unbound and asks the store again.
   */
  async function reuse(
    input: CreateImageInput,
    ctx: Context,
    outDir: string,
    bound: Extract<Consult, { kind: 'reuse' }>,
  ): Promise<CreateImageResult> {
    const { source, from } = bound;
    const end = source.ended?.outcome;
    const reported = (error: string, generated = false): CreateImageResult => ({
      outcome: 'reused',
      reusedFrom: from,
      images: [],
      error,
      ...(generated ? { generated: true } : {}),
    });
    const where = `batch ${source.batchId} (row ${source.rowId}, key ${source.idempotencyKey})`;
    if (end === KeyOutcome.Succeeded) {
      const copied = await copyImages(source, outDir, input.rowId);
      if (copied) return { outcome: 'reused', reusedFrom: from, images: copied };
    }
    if (end !== undefined && NO_MONEY_HELD.has(end)) return unboundAgain(input, source);
    // Still in flight where it was sent: that row polls its creation (two pollers would pass the service's minimum
    // interval), so this one waits for its end, as long as a creation may take; then follows it itself, if it can.
    const waited = end === undefined && waitedTooLong(input, ctx);
    if (end === undefined && !waited) {
      return fail(
        { kind: 'inFlight', status: `waiting for ${where}, which sent the same request` },
        api().pollIntervalMs(),
      );
    }
    // Ended with a creation nobody polls any more (its images gone, its row out of time): fetched again by its id.
    const followable = end === KeyOutcome.Succeeded || end === KeyOutcome.TimedOut || (waited && end === undefined);
    if (source.creationId && followable) {
      const learned = keyProgressOf(currentDetails(ctx));
      try {
        const result = await pollAndSave(input, ctx, { ...learned, creationId: source.creationId });
        if (result.outcome === 'succeeded') return { outcome: 'reused', reusedFrom: from, images: result.images };
        // Its creation failed and was refunded: it serves nobody.
        return unboundAgain(input, source);
      } catch (err) {
        const type = err instanceof ApplicationFailure ? err.type : undefined;
        if (!(err instanceof ApplicationFailure) || !err.nonRetryable) throw err;
        if (type === FailureType.BatchStop || type === FailureType.Config) throw err;
        const generated = keyProgressOf(currentDetails(ctx)).generated === true;
        return reported(`the request was paid by ${where}; fetching its creation again: ${err.message}`, generated);
      }
    }
    if (end === undefined) {
      return reported(
        `the same request was sent by ${where}, which did not end within the maximum wait ` +
          `(${formatWait(input.maxPollWaitMs)}); nothing was sent for this row: run it again once that key has ended`,
      );
    }
    return reported(
      `the same request was sent by ${where}, and its outcome is not known (${end}): nothing was sent for this ` +
        `row; resolve it with imagebatch reconcile ${source.batchId}`,
    );
  }

  /** Whether the row has waited for an earlier request longer than a creation may take (counted from its first wait). */
  function waitedTooLong(input: CreateImageInput, ctx: Context): boolean {
    const since = keyProgressOf(currentDetails(ctx)).reuseWaitSinceMs ?? deps.now();
    note(ctx, { reuseWaitSinceMs: since });
    return deps.now() - since > input.maxPollWaitMs;
  }

  /** The earlier request held nothing: the row is unbound from it, and its next attempt asks the store again. */
  async function unboundAgain(input: CreateImageInput, source: LedgerKey): Promise<never> {
    await deps.ledger.unbind(input.batchId, input.rowId, source.idempotencyKey);
    throw toApplicationFailure(
      { kind: 'inFlight', status: `key ${source.idempotencyKey} held nothing: asking again` },
      1,
    );
  }

  async function pollAndSave(
    input: CreateImageInput,
    ctx: Context,
    progress: KeyProgress & { creationId: string },
  ): Promise<CreateImageResult> {
    const { creationId } = progress;
    const acceptedAt = progress.acceptedAtMs ?? deps.now();
    if (progress.acceptedAtMs === undefined) note(ctx, { acceptedAtMs: acceptedAt });
    // No poll of a creation sooner than the minimum interval after the previous one, whatever came between (an
    // unknown outcome's short backoff, a download retry, a Retry-After of 0 or in the past).
    // The attempt ends unsent and the activity's retry waits the rest of the interval (durably, like any wait).
    const since = progress.lastPollAtMs === undefined ? Infinity : deps.now() - progress.lastPollAtMs;
    const interval = api().pollIntervalMs();
    if (since < interval) {
      const retryAfterMs = Math.max(1, Math.ceil(interval - Math.max(0, since)));
      throw toApplicationFailure(
        {
          kind: 'rateLimited',
          httpStatus: 0,
          code: 'MIN_POLL_INTERVAL',
          message: `the previous poll of creation ${creationId} was ${Math.max(0, since)} ms ago`,
          retryAfterMs,
          local: true,
        },
        retryAfterMs,
      );
    }
    note(ctx, { lastPollAtMs: deps.now() });
    try {
      const poll = await pollOnceCounting(creationId, ctx, () => pollDelay(input, progress, deps.now() - acceptedAt));
      if (progress.pollExplore) plan?.observe(input.request.model, deps.now() - acceptedAt);
      const costUsd = poll.costUsd ?? progress.costUsd;
      const cost = costUsd === undefined ? {} : { costUsd };
      if (poll.outcome === 'failed') {
        return { outcome: 'failed', creationId, ...cost, error: poll.error, retryable: poll.retryable };
      }
      note(ctx, { generated: true, ...cost }); // paid: the record's cost stays with the key, images saved or not
      // A success with no image is not a success: paid, nothing to save, the row ends images_unsaved.
      if (poll.images.length === 0) {
        throw noImageFailure({
          creationId,
          status: poll.status,
          recordKeys: poll.recordKeys,
          imageFields: deps.config.imageFields,
        });
      }
      checkImageCount(creationId, poll.images, input.request.num_images);
      const images = await download(
        { batchId: input.batchId, rowId: input.rowId, creationId, images: poll.images, outDir: input.outDir },
        creationByteBudget(input.request.num_images, deps.config.maxDownloadBytes),
      );
      return { outcome: 'succeeded', creationId, ...cost, images };
    } catch (err) {
      // Past the maximum wait, an answer that would be tried again ends the key instead: a creation still in flight
      // (or unanswered), or images that could not be saved yet. Judged after a poll, so a row that waited out a
      // batch stop longer than the maximum wait still asks once.
      const again = err instanceof ApplicationFailure && !err.nonRetryable;
      if (!again || deps.now() - acceptedAt < input.maxPollWaitMs) throw err;
      const generated = keyProgressOf(currentDetails(ctx)).generated === true;
      throw ApplicationFailure.create({
        type: generated ? FailureType.DownloadFailed : FailureType.MaxWait,
        message: generated
          ? `creation ${creationId} succeeded, but its images could not be saved within the maximum wait: ${err.message}`
          : `creation ${creationId} did not end within the maximum wait (last answer: ${err.message})`,
        nonRetryable: true,
        // The last answer, on its own: the row's record says it (a status under another name shows here).
        details: [{ maxPollWaitMs: input.maxPollWaitMs, lastAnswer: err.message.slice(0, MAX_LAST_ANSWER_CHARS) }],
      });
    }
  }

  /**
   * The wait before the next poll of a key's creation, `elapsedMs` after its acceptance: the poll plan's, within the
   * poll interval (never sooner) and the key's maximum wait. A creation accepted before this process knew it (no
   * ticket) is polled at the interval.
   */
  function pollDelay(input: CreateImageInput, progress: KeyProgress, elapsedMs: number): number {
    const now = deps.now();
    bindingLimit(now);
    if (!plan) return api().pollIntervalMs();
    const ticket = progress.pollExplore === undefined ? undefined : { explore: progress.pollExplore };
    const bounds = { intervalMs: api().pollIntervalMs(), elapsedMs, maxWaitMs: input.maxPollWaitMs };
    return plan.delay(input.request.model, ticket, bounds, now);
  }

  /**
   * The service's limit that binds now, for the row's report; a change of what holds keys back is worth a line in
   * the log. A task queue that holds keys back is the key's rate when it has a rate limit, else busy workers: no
   * limit of the service.
   */
  function bindingLimit(now: number): BindingLimit {
    const held = limits.heldNow(now);
    const seen = held === 'queue' && !deps.taskQueueRateLimited ? 'busy' : held;
    if (seen !== told) {
      told = seen;
      const polls = plan ? `; poll plan: ${POLLS_TEXT[limits.regime(now)]}` : '';
      deps.logger.info(`${HELD_TEXT[seen]}${polls}`, { heldBy: seen });
    }
    switch (seen) {
      case 'queue':
        return 'rate';
      case 'busy':
        return 'open';
      default:
        return seen;
    }
  }

  /**
   * The task queue held a key's first attempt back longer than {@link QUEUE_LAG_MS} after it was scheduled: the
   * worker's rate limit (IMAGEBATCH_RATE_LIMIT, just under the key's rate) binds, which the poll plan counts as the
   * rate binding. Only first attempts: a retry's timer alone starts up to about a second late on the dev server
   * (seen: 780 ms after a 200 ms delay), while a first attempt waits only for the queue (3 to 50 ms seen).
   */
  function noteQueueLag(ctx: Context): void {
    if (ctx.info.attempt !== 1) return;
    const lag = deps.now() - ctx.info.currentAttemptScheduledTimestampMs;
    if (lag > QUEUE_LAG_MS) limits.signal('queue_lag', deps.now());
  }

  /** {@link pollOnce}, counting a run of 404s without the service's code: past the limit the batch stops. */
  async function pollOnceCounting(
    creationId: string,
    ctx: Context,
    inFlightDelayMs: () => number,
  ): Promise<PollCreationResult> {
    try {
      const poll = await pollOnce({ creationId }, inFlightDelayMs);
      // A run ends with any other answer; details are written again only when there was one.
      if (countOf(asRecord(currentDetails(ctx)).unrecognizedNotFound) > 0) note(ctx, { unrecognizedNotFound: 0 });
      return poll;
    } catch (err) {
      const unrecognized =
        err instanceof ApplicationFailure && asRecord(err.details?.[0]).unrecognizedNotFound === true;
      if (!unrecognized) throw err;
      const run = countOf(asRecord(currentDetails(ctx)).unrecognizedNotFound) + 1;
      note(ctx, { unrecognizedNotFound: run });
      if (run < UNRECOGNIZED_NOT_FOUND_LIMIT) throw err;
      note(ctx, { unrecognizedNotFound: 0, ambiguousTries: 0 });
      throw toApplicationFailure({
        kind: 'batchStop',
        details: {
          reason: BatchStopReason.CreationPathNotFound,
          httpStatus: 404,
          message:
            `${run} polls in a row of creation ${creationId} were answered 404 without the service's ERR_NOT_FOUND ` +
            `code: check IMAGEGEN_CREATION_PATH (now ${deps.config.creationPath}) and IMAGEGEN_BASE_URL, then resume`,
        },
      });
    }
  }

  return {
    /** {@link submitOnce}, as an activity (a single request; the row workflows use {@link createImage}). */
    async submitCreation(input: SubmitCreationInput): Promise<SubmitCreationResult> {
      return submitOnce(input);
    },

    /**
     * GET a creation once. Returns it when it has ended; throws Pending (retryable after the poll interval)
     * while it is in flight, RateLimited, Ambiguous/Malformed (retryable, backoff), CreationNotFound, BatchStop,
     * Config. An inline image's data does not go into history: its `url` is a description of it
     * (`data:image/png;base64 (N characters) at data[0].b64_json`), so only {@link createImage}, which polls and saves
     * in one attempt, saves inline images.
     */
    async pollCreation(input: PollCreationInput): Promise<PollCreationResult> {
      return withoutInlineData(await pollOnce(input));
    },

    /** Downloads a creation's images into `<outDir>/<rowId>/`; throws DownloadFailed. */
    async downloadImages(input: DownloadImagesInput): Promise<DownloadedImage[]> {
      return download(input);
    },

    /**
     * One idempotency key from submission to saved images (see {@link CreateImageInput}). Returns how the creation
     * ended; throws Pending, RateLimited, Ambiguous, Malformed, DownloadFailed (retryable) or Unknown, Refunded,
     * Rejected, BatchStop, CreationNotFound, MaxWait, DownloadFailed, Config (non-retryable), each with the key's
     * {@link KeyProgress} as its second detail.
     */
    async createImage(input: CreateImageInput): Promise<CreateImageResult> {
      const result = await createImageAttempt(input, Context.current());
      const now = deps.now();
      return { ...result, limit: bindingLimit(now), ...(limits.refusedNow(now) ? { refused: true as const } : {}) };
    },

    /** GET the model catalog (prices in USD per request where the service says them). */
    async fetchModels(): Promise<ModelInfo[]> {
      const ctx = Context.current();
      const outcome = await whileHeartbeating(ctx, api().listModels(ctx.cancellationSignal));
      switch (outcome.kind) {
        case 'models':
          return outcome.models;
        case 'ambiguous':
        case 'notSent':
        case 'malformed':
          return fail(outcome, backoffMs(ctx.info.attempt));
        case 'rateLimited':
        case 'batchStop':
        case 'config':
        case 'notFound':
        case 'refunded':
        case 'rejected':
        case 'inFlight':
          return fail(outcome);
        case 'accepted':
        case 'ended':
          return fail({ kind: 'malformed', lastError: `unexpected ${outcome.kind} answer to GET models` });
      }
    },
  };
}

/** `poll` with each inline image's data replaced by a short description (activity results go into history). */
export function withoutInlineData(poll: PollCreationResult): PollCreationResult {
  if (poll.outcome !== 'succeeded') return poll;
  return {
    ...poll,
    images: poll.images.map((image) => ({
      ...image,
      url: describeImageUrl(image.url, image.source),
      ...(image.source === undefined ? {} : { source: clipSource(image.source) }),
    })),
  };
}

function countOf(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

/** The fields of {@link KeyProgress} found in heartbeat details (anything else there is ignored). */
export function keyProgressOf(details: unknown): KeyProgress {
  const d = asRecord(details);
  const out: KeyProgress = {};
  if (typeof d.creationId === 'string' && d.creationId) out.creationId = d.creationId;
  for (const field of ['acceptedAtMs', 'costUsd', 'lastPollAtMs', 'reuseWaitSinceMs'] as const) {
    const v = d[field];
    if (typeof v === 'number' && Number.isFinite(v)) out[field] = v;
  }
  for (const field of ['ambiguousTries', 'unrecognizedNotFound'] as const) {
    if (d[field] !== undefined) out[field] = countOf(d[field]);
  }
  if (d.generated === true) out.generated = true;
  if (d.mayBeSent === true) out.mayBeSent = true;
  if (typeof d.pollExplore === 'boolean') out.pollExplore = d.pollExplore;
  return out;
}

/** The same failure with the key's progress as its second detail (a cancellation or another error as it is). */
function withProgress(err: unknown, progress: KeyProgress): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  return failureWith(err, { details: [err.details?.[0] ?? null, progress] });
}
