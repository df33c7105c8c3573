import type { Dispatcher } from 'undici';
import type { ImageApiClient } from '../api/client';
import { ErrorCode } from '../api/contract';
import { backoffCeilingMs, pollStep, submitStep, type PollStep, type SubmitStep } from '../api/creation-steps';
import { findRecordFields, StatusMeaning, type RecordFindings, type RecordReading } from '../api/record-findings';
import { imagesOf } from '../api/schemas';
import { judgeInline, type UnjudgedRecord } from '../api/unrecognised-status';
import { BatchStopReason, type ModelInfo, type PollCreationResult, type StatusCheck } from '../model';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import type { RawRead } from './raw-read';
import { recordOf } from './record-checks';
import type { DoctorCheck, DoctorDeps, SettingToWrite, SpendOneOptions } from './types';

/** The requests of `doctor --spend-one`: the one submission, and the polls of its creation. */

/** Longest `Retry-After` doctor waits out in place; a longer one is reported. */
export const MAX_WAIT_IN_PLACE_MS = 60_000;
/** The fixed prompt of the paid test: specific, so that no safety filter declines it as too generic. */
export const SPEND_ONE_PROMPT = 'imagebatch doctor test: a red apple on a wooden table by a window, studio photo';
/** Status words a report names at most. */
const STATUSES_SHOWN = 8;

export interface SpendContext {
  deps: DoctorDeps;
  options: SpendOneOptions;
  client: ImageApiClient;
  dispatcher: Dispatcher;
  key: string;
  /** The catalog's models; undefined when the catalog could not be read or understood. */
  models: ModelInfo[] | undefined;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  add: (check: DoctorCheck) => void;
  addSetting: (setting: SettingToWrite) => void;
  /** Turns a check that only a real creation could settle (see {@link DoctorCheck.spendOneSettles}) into `check`. */
  settle: (check: DoctorCheck) => void;
  /** A free GET of `path` under the base URL, read raw (see `raw-read.ts`). */
  raw: (path: string) => Promise<RawRead>;
}

export type Failed = { kind: 'failed'; check: Pick<DoctorCheck, 'found' | 'hint'> };

/** How the configured settings read a creation record. */
export function readingOf(config: ServiceConfig): RecordReading {
  return {
    idFields: config.idFields,
    statusFields: config.statusFields,
    errorFields: config.errorFields,
    imageFields: config.imageFields,
    costFields: config.costFields,
    successStatuses: config.successStatuses,
    maxInlineBytes: config.maxDownloadBytes,
  };
}

/** The paid test's request: its fixed prompt and the model asked (the same body on every send of its key). */
export function spendOneRequest(ctx: Pick<SpendContext, 'options'>): { prompt: string; model: string } {
  return { prompt: SPEND_ONE_PROMPT, model: ctx.options.model };
}

/** Submits the one creation: same key on every try; waits out short Retry-Afters; gives up at the deadline. */
export async function submitOne(
  ctx: SpendContext,
  idempotencyKey: string,
  deadline: number,
): Promise<{ kind: 'accepted'; creationId: string; replayed?: boolean } | Failed> {
  const config = ctx.deps.config;
  const unknown = (why: string): Failed => ({
    kind: 'failed',
    check: {
      found: `outcome unknown (${why}): the creation may have been charged`,
      hint: `run doctor --spend-one again with the same model and --test-id: the same key finds out, and is not charged twice`,
    },
  });
  // Whether any try may have reached the service: then its outcome is unknown, whatever the later tries did.
  let mayBeSent = false;
  for (let tries = 1; ; tries += 1) {
    const step = submitStep(await ctx.client.submit({ idempotencyKey, request: spendOneRequest(ctx) }));
    switch (step.kind) {
      case 'accepted': {
        const { creationId, replayed } = step.accepted;
        return { kind: 'accepted', creationId, ...(replayed === undefined ? {} : { replayed }) };
      }
      case 'held': {
        const { outcome } = step;
        if (outcome.retryAfterMs > MAX_WAIT_IN_PLACE_MS || ctx.now() + outcome.retryAfterMs > deadline) {
          return {
            kind: 'failed',
            check: {
              found: `HTTP ${outcome.httpStatus} ${outcome.code}: ${outcome.message} (retry after ${outcome.retryAfterMs} ms); nothing charged`,
              hint: 'run it again later',
            },
          };
        }
        await ctx.sleep(outcome.retryAfterMs);
        continue;
      }
      case 'unclear':
        mayBeSent ||= step.sent;
        if (tries >= config.maxAmbiguousTries || ctx.now() >= deadline) {
          // A send that never left is tried again as an outage: when all of them never left, nothing was charged.
          return mayBeSent ? unknown(step.lastError) : notSent(step.lastError);
        }
        await ctx.sleep(backoffCeilingMs(tries, config));
        continue;
      case 'ends':
        return { kind: 'failed', check: endedCheck(step.outcome) };
      case 'unexpected':
        return unknown(step.lastError);
    }
  }
}

/** A submission that never reached the service in its tries: nothing was charged. */
function notSent(lastError: string): Failed {
  return {
    kind: 'failed',
    check: {
      found: `not sent (${lastError}): nothing was charged`,
      hint: `check ${SERVICE_CONFIG_ENV.baseUrl} and that the service is reachable from the worker`,
    },
  };
}

/** What an answer that ends the key tells of the paid test. */
function endedCheck(outcome: Extract<SubmitStep, { kind: 'ends' }>['outcome']): Failed['check'] {
  switch (outcome.kind) {
    case 'refunded':
      return {
        found: `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message} (charged and refunded)`,
        hint: 'the service is having trouble; run it again later with another --test-id',
      };
    case 'rejected':
      return {
        found:
          `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message}` +
          (outcome.details.fieldErrors.length > 0
            ? ` (${outcome.details.fieldErrors.map((f) => `${f.field}: ${f.message}`).join('; ')})`
            : '') +
          '; nothing charged',
        hint: `check ${SERVICE_CONFIG_ENV.submitPath} and how requests are mapped`,
      };
    case 'batchStop':
      return {
        found: `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}: ${outcome.details.message}; nothing charged`,
        hint:
          outcome.details.httpStatus === 402
            ? `top up the wallet${outcome.details.topUpUrl ? ` (${outcome.details.topUpUrl})` : ''} or raise the key's budget`
            : 'check the key and the account',
      };
    case 'config':
      return { found: outcome.message };
  }
}

/** How polling a creation ended. */
export type Polled =
  | { kind: 'ended'; result: PollCreationResult; json: unknown; polls: number; intervalMs: number }
  /**
   * A status a batch cannot read (not at `IMAGEGEN_STATUS_FIELDS`), or in no set (success, `failed`, in flight), on a
   * record that holds an image judged by its bytes, or something at a configured image path (`check` says which).
   */
  | { kind: 'unrecognised'; status: string; json: unknown; polls: number; intervalMs: number; check: StatusCheck }
  | Failed;

/**
 * Polls one creation through the client (so that every mapping setting applies) at the poll interval until it ends;
 * then reads its record once more, raw, for its shape (key paths only), the poll interval after the last poll.
 */
export async function pollUntilEnded(ctx: SpendContext, creationId: string, deadline: number): Promise<Polled> {
  const config = ctx.deps.config;
  let wait = ctx.client.pollIntervalMs();
  let last = 'no poll yet';
  let unclear = 0;
  const seen: string[] = [];
  const judged: StatusCheck[] = [];
  const path = config.creationPath.replace('{id}', encodeURIComponent(creationId));
  for (let polls = 1; ; polls += 1) {
    if (ctx.now() + wait > deadline) {
      const words = seen.length > 0 ? `; statuses seen: ${seen.map((w) => `"${w}"`).join(', ')}` : '';
      return {
        kind: 'failed',
        check: {
          found: `creation ${creationId} had not ended within --max-wait (${Math.round(ctx.options.maxWaitMs / 1000)} s; last: ${last}${words}); it was paid for`,
          hint: 'run doctor --spend-one again with the same model and --test-id to follow it (nothing is paid again)',
        },
      };
    }
    await ctx.sleep(wait);
    const step = pollStep(await ctx.client.getCreation(creationId, ctx.deps.signal));
    wait = ctx.client.pollIntervalMs();
    switch (step.kind) {
      case 'ended': {
        const json = await readAgain(ctx, path, ctx.client.pollIntervalMs(), deadline);
        return { kind: 'ended', result: step.result, json, polls, intervalMs: ctx.client.pollIntervalMs() };
      }
      case 'inFlight': {
        const { status, retryAfterMs, unrecognised } = step.outcome;
        last = `status "${status}"`;
        if (!seen.includes(status) && seen.length < STATUSES_SHOWN) seen.push(status);
        wait = Math.max(wait, retryAfterMs ?? 0);
        // In flight to a batch, unless the status is in no set and its record holds an image (judged as a batch
        // judges it, once a word) or something at a configured image path.
        const check = unrecognised && (await judgeOnce(ctx, status, unrecognised, judged));
        if (!check || !stopsBatch(check) || ctx.now() + 2 * wait > deadline) continue;
        const json = await readAgain(ctx, path, wait, deadline);
        return { kind: 'unrecognised', status, json, polls, intervalMs: wait, check };
      }
      case 'held': {
        const { outcome } = step;
        last = outcome.local ? 'held back locally' : `HTTP ${outcome.httpStatus} ${outcome.code}`;
        wait = Math.max(wait, Math.min(outcome.retryAfterMs, MAX_WAIT_IN_PLACE_MS));
        continue;
      }
      case 'unclear': {
        const { outcome } = step;
        if (outcome.kind === 'malformed') {
          // No status at the configured paths: one under a common name still shows what the record says.
          const read = await readUnread(ctx, creationId, outcome.lastError, { path, wait, deadline, polls, judged });
          if (read.kind !== 'polled') return read;
          last = read.last;
          continue;
        }
        if (outcome.kind === 'ambiguous' && outcome.unrecognizedNotFound) {
          return {
            kind: 'failed',
            check: {
              found: `a poll of creation ${creationId} answered 404 without ${ErrorCode.NotFound} (${outcome.lastError})`,
              hint: `set ${SERVICE_CONFIG_ENV.creationPath} to the service's path of a creation`,
            },
          };
        }
        last = outcome.lastError;
        if (++unclear >= config.maxAmbiguousTries) {
          return { kind: 'failed', check: { found: `polls of creation ${creationId} keep failing: ${last}` } };
        }
        continue;
      }
      case 'ends':
        return pollEnded(ctx, creationId, step.outcome, { path, wait, polls, deadline, judged });
      case 'unexpected':
        return { kind: 'failed', check: { found: step.lastError } };
    }
  }
}

/** Reads of a record again after a 429 or 503 at most. */
const MAX_READS_AGAIN = 5;

/**
 * The creation's record read once more, raw, `waitMs` after the last poll (a raw read is a poll too). A 429 or 503 is
 * waited out as its Retry-After says, while the deadline (`--max-wait`) allows; undefined when it could not be read.
 */
async function readAgain(ctx: SpendContext, path: string, waitMs: number, deadline: number): Promise<unknown> {
  let wait = waitMs;
  for (let reads = 0; reads < MAX_READS_AGAIN; reads++) {
    await ctx.sleep(wait);
    const read = await ctx.raw(path);
    if (read.retryAfterMs === undefined) return read.json;
    wait = read.retryAfterMs;
    if (ctx.now() + wait > deadline) return undefined;
  }
  return undefined;
}

/** Where a poll stands, for the raw reads that follow an answer the settings could not read. */
interface PollAt {
  path: string;
  wait: number;
  polls: number;
  deadline: number;
  /** Status words in no set judged so far, once each. */
  judged: StatusCheck[];
}

/**
 * A poll whose record the settings could not read (no status at the configured paths): the record read raw, the
 * poll interval later. A status under a common name that is in flight goes on polling (`polled`, with what it said).
 */
async function readUnread(
  ctx: SpendContext,
  creationId: string,
  lastError: string,
  at: PollAt,
): Promise<Polled | { kind: 'polled'; last: string }> {
  const failed: Failed = { kind: 'failed', check: { found: `a poll of creation ${creationId}: ${lastError}` } };
  if (ctx.now() + 2 * at.wait > at.deadline) return failed;
  const json = await readAgain(ctx, at.path, at.wait, at.deadline);
  const found = findRecordFields(json, readingOf(ctx.deps.config));
  if (found?.status === undefined || found.status.meaning === StatusMeaning.Failed) return failed;
  // An image in it, judged by its bytes as a batch judges one, says a batch would have a success to read.
  const held = heldIn(ctx, json, found);
  const word = found.status.word;
  const check = !held
    ? undefined
    : 'image' in held
      ? { status: word, image: held.image }
      : await judgeOnce(ctx, word, held.unjudged, at.judged);
  if (check?.image) return { kind: 'unrecognised', status: word, json, polls: at.polls, intervalMs: at.wait, check };
  return { kind: 'polled', last: `status "${word}" at ${found.status.at}` };
}

/**
 * What a record whose status is in no set holds, judged by the bytes of its URLs as a batch judges them (the judge
 * doctor was given, src/activities/status-check.ts), once per status word (`judged` keeps the verdicts).
 */
async function judgeOnce(
  ctx: SpendContext,
  status: string,
  record: UnjudgedRecord,
  judged: StatusCheck[],
): Promise<StatusCheck> {
  const word = status.trim().toLowerCase();
  const known = judged.find((c) => c.status === word);
  if (known) return known;
  const judge = ctx.deps.judgeStatus;
  const check: StatusCheck = judge
    ? await judge(status, record, ctx.deps.signal)
    : { status: word, ...(record.atImagePath === undefined ? {} : { atImagePath: record.atImagePath }) };
  judged.push(check);
  return check;
}

/** What a record read raw holds, as the settings read its images: an inline image judged, or URLs to judge. */
function heldIn(ctx: SpendContext, json: unknown, found: RecordFindings): ReturnType<typeof judgeInline> {
  const { config } = ctx.deps;
  const reading = { imageFields: config.imageFields, maxInlineBytes: config.maxDownloadBytes };
  return judgeInline(imagesOf({ fields: recordOf(json, found) }, reading), config.maxDownloadBytes);
}

/** Whether a batch stops on a status in no set whose record was judged so. */
function stopsBatch(check: StatusCheck): boolean {
  return check.image !== undefined || check.atImagePath !== undefined;
}

/** A poll answer that ends the paid test's polling. */
async function pollEnded(
  ctx: SpendContext,
  creationId: string,
  outcome: Extract<PollStep, { kind: 'ends' }>['outcome'],
  at: PollAt,
): Promise<Polled> {
  switch (outcome.kind) {
    case 'notFound':
      return {
        kind: 'failed',
        check: {
          found: `the service says creation ${creationId} does not exist (404 ${outcome.code}); it was accepted, so it was paid for`,
          hint: 'ask the service about the creation id; --test-id <another name> pays for a new test',
        },
      };
    case 'batchStop': {
      // A status in no set on a record with an inline image (judged by its bytes): what the record says, and the
      // settings to write.
      if (outcome.details.reason === BatchStopReason.UnrecognisedStatus) {
        const json = await readAgain(ctx, at.path, at.wait, at.deadline);
        const found = findRecordFields(json, readingOf(ctx.deps.config));
        const held = found && heldIn(ctx, json, found);
        if (found?.status && held && 'image' in held) {
          const check = { status: found.status.word, image: held.image };
          return { kind: 'unrecognised', status: found.status.word, json, polls: at.polls, intervalMs: at.wait, check };
        }
      }
      return {
        kind: 'failed',
        check: { found: `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}: ${outcome.details.message}` },
      };
    }
    case 'config':
      return { kind: 'failed', check: { found: outcome.message } };
    case 'refunded':
    case 'rejected':
      // A refusal answers a submission, not a poll.
      return { kind: 'failed', check: { found: `unexpected ${outcome.kind} answer to a poll` } };
  }
}
