import type { Dispatcher } from 'undici';
import type { ImageApiClient } from '../api/client';
import { ErrorCode } from '../api/contract';
import { backoffCeilingMs, pollStep, submitStep, type PollStep, type SubmitStep } from '../api/creation-steps';
import { findRecordFields, StatusMeaning, type RecordReading } from '../api/record-findings';
import { BatchStopReason, type ModelInfo, type PollCreationResult } from '../model';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
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
  raw: (path: string) => Promise<{ status?: number; json: unknown }>;
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
   * A status a batch cannot read (not at `IMAGEGEN_STATUS_FIELDS`), or neither in the success set nor `failed` (in
   * flight to a batch), on a record that carries an image.
   */
  | { kind: 'unrecognised'; status: string; json: unknown; polls: number; intervalMs: number }
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
        await ctx.sleep(ctx.client.pollIntervalMs());
        const { json } = await ctx.raw(path);
        return { kind: 'ended', result: step.result, json, polls, intervalMs: ctx.client.pollIntervalMs() };
      }
      case 'inFlight': {
        const { status } = step.outcome;
        last = `status "${status}"`;
        if (!seen.includes(status) && seen.length < STATUSES_SHOWN) seen.push(status);
        // Not a success, not "failed": in flight to a batch. A record that carries an image says otherwise.
        if (ctx.now() + 2 * wait > deadline) continue;
        await ctx.sleep(wait);
        const { json } = await ctx.raw(path);
        const found = findRecordFields(json, readingOf(config));
        if (found?.status?.meaning === StatusMeaning.InFlight && found.images.count > 0) {
          return { kind: 'unrecognised', status: found.status.word, json, polls, intervalMs: wait };
        }
        continue;
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
          const read = await readUnread(ctx, creationId, outcome.lastError, { path, wait, deadline, polls });
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
        return pollEnded(ctx, creationId, step.outcome, { path, wait, polls });
      case 'unexpected':
        return { kind: 'failed', check: { found: step.lastError } };
    }
  }
}

/** Where a poll stands, for the raw reads that follow an answer the settings could not read. */
interface PollAt {
  path: string;
  wait: number;
  polls: number;
}

/**
 * A poll whose record the settings could not read (no status at the configured paths): the record read raw, the
 * poll interval later. A status under a common name that is in flight goes on polling (`polled`, with what it said).
 */
async function readUnread(
  ctx: SpendContext,
  creationId: string,
  lastError: string,
  at: PollAt & { deadline: number },
): Promise<Polled | { kind: 'polled'; last: string }> {
  const failed: Failed = { kind: 'failed', check: { found: `a poll of creation ${creationId}: ${lastError}` } };
  if (ctx.now() + 2 * at.wait > at.deadline) return failed;
  await ctx.sleep(at.wait);
  const { json } = await ctx.raw(at.path);
  const found = findRecordFields(json, readingOf(ctx.deps.config));
  if (found?.status === undefined || found.status.meaning === StatusMeaning.Failed) return failed;
  if (found.images.count > 0) {
    return { kind: 'unrecognised', status: found.status.word, json, polls: at.polls, intervalMs: at.wait };
  }
  return { kind: 'polled', last: `status "${found.status.word}" at ${found.status.at}` };
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
      // A status in no set on a record with an image: what the record says, and the settings to write.
      if (outcome.details.reason === BatchStopReason.UnrecognisedStatus) {
        await ctx.sleep(at.wait); // the raw read is a poll too: no sooner than the interval
        const { json } = await ctx.raw(at.path);
        const found = findRecordFields(json, readingOf(ctx.deps.config));
        if (found?.status) {
          return { kind: 'unrecognised', status: found.status.word, json, polls: at.polls, intervalMs: at.wait };
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
