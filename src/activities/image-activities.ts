import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { toApplicationFailure, type FailureOutcome } from '../api/classify';
import { ImageApiClient, type ClientOutcome, type Logger } from '../api/client';
import type { HoldRegistry } from '../api/holds';
import type { ApiKeyProvider } from '../api/api-key';
import { createDownloadDispatcher } from '../api/http';
import type { ServiceConfig } from '../config/service-config';
import { downloadImages } from './download';
import { currentDetails, heartbeat, whileHeartbeating } from './heartbeat';
import type {
  CollectCreationInput,
  CollectCreationResult,
  DownloadedImage,
  DownloadImagesInput,
  ModelInfo,
  PollCreationInput,
  PollCreationResult,
  SubmitCreationInput,
  SubmitCreationResult,
} from './types';

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
  /** Jitter source in [0, 1). */
  random: () => number;
}

/** What a submission attempt carries to its next retry through heartbeat details. */
export interface SubmitHeartbeat {
  ambiguousTries: number;
}

export function createImageActivities(deps: ImageActivityDeps) {
  let client: ImageApiClient | undefined;
  let downloadDispatcher: Dispatcher | undefined = deps.downloadDispatcher;
  const api = () =>
    (client ??= new ImageApiClient({
      config: deps.config,
      apiKey: deps.apiKey,
      now: deps.now,
      logger: deps.logger,
      ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
      ...(deps.holds ? { holds: deps.holds } : {}),
    }));

  /** Exponential backoff with jitter (half to full), for the n-th consecutive unknown outcome. */
  function backoffMs(n: number): number {
    const { backoffBaseMs, backoffMaxMs } = deps.config;
    const ceiling = Math.min(backoffMaxMs, backoffBaseMs * 2 ** Math.min(Math.max(n - 1, 0), 30));
    return Math.round(ceiling / 2 + (deps.random() * ceiling) / 2);
  }

  /** Consecutive transient failures so far, from the previous attempts' heartbeat details. */
  function priorTries(): number {
    const d = Context.current().info.heartbeatDetails as Partial<SubmitHeartbeat> | undefined;
    const n = d?.ambiguousTries;
    return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : 0;
  }

  function fail(outcome: FailureOutcome, retryDelayMs?: number): never {
    throw toApplicationFailure(outcome, retryDelayMs);
  }

  /** One GET of a creation: its end, or a failure that makes the activity try again later. */
  async function pollOnce(input: PollCreationInput): Promise<PollCreationResult> {
    const ctx = Context.current();
    const prior = priorTries();
    const outcome = await whileHeartbeating(ctx, api().getCreation(input.creationId, ctx.cancellationSignal));
    const transient = (o: FailureOutcome): never => {
      heartbeat(ctx, { ambiguousTries: prior + 1 } satisfies SubmitHeartbeat);
      return fail(o, backoffMs(prior + 1));
    };
    if (prior > 0 && outcome.kind !== 'ambiguous' && outcome.kind !== 'malformed') {
      heartbeat(ctx, { ambiguousTries: 0 } satisfies SubmitHeartbeat);
    }
    switch (outcome.kind) {
      case 'ended':
        return outcome.result;
      case 'inFlight':
        return fail(outcome, api().pollIntervalMs());
      case 'ambiguous':
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

  async function download(input: DownloadImagesInput): Promise<DownloadedImage[]> {
    const ctx = Context.current();
    downloadDispatcher ??= createDownloadDispatcher(deps.config);
    const work = downloadImages(input, {
      dispatcher: downloadDispatcher,
      outputRoot: deps.outputRoot,
      maxBytes: deps.config.maxDownloadBytes,
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

  return {
    /**
     * POST a creation with its idempotency key. Returns the accepted creation; otherwise throws
     * RateLimited / Ambiguous (retryable, same key), Unknown (after `maxAmbiguousTries` unknown outcomes),
     * Refunded, Rejected, BatchStop or Config (non-retryable).
     */
    async submitCreation(input: SubmitCreationInput): Promise<SubmitCreationResult> {
      const ctx = Context.current();
      const prior = priorTries();
      const outcome: ClientOutcome = await whileHeartbeating(ctx, api().submit(input, ctx.cancellationSignal));
      const ambiguous = (lastError: string, o: FailureOutcome): never => {
        const tries = prior + 1;
        if (tries >= deps.config.maxAmbiguousTries) {
          deps.logger.warn('image api: submission outcome unknown, giving up on this key', {
            idempotencyKey: input.idempotencyKey,
            tries,
          });
          return fail({ kind: 'unknown', details: { idempotencyKey: input.idempotencyKey, tries, lastError } });
        }
        // Durable across attempts: the next attempt reads it back from `info.heartbeatDetails`.
        heartbeat(ctx, { ambiguousTries: tries } satisfies SubmitHeartbeat);
        return fail(o, backoffMs(tries));
      };
      switch (outcome.kind) {
        case 'accepted':
          return {
            creationId: outcome.creationId,
            status: outcome.status,
            ...(outcome.costUsd === undefined ? {} : { costUsd: outcome.costUsd }),
            ...(outcome.replayed === undefined ? {} : { replayed: outcome.replayed }),
          };
        case 'ambiguous':
          return ambiguous(outcome.lastError, outcome);
        case 'malformed':
          return ambiguous(outcome.lastError, { kind: 'ambiguous', lastError: outcome.lastError });
        case 'rateLimited':
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
    },

    /**
     * GET a creation once. Returns it when it has ended; throws Pending (retryable after the poll interval)
     * while it is in flight, RateLimited, Ambiguous/Malformed (retryable, backoff), CreationNotFound, BatchStop,
     * Config.
     */
    async pollCreation(input: PollCreationInput): Promise<PollCreationResult> {
      return pollOnce(input);
    },

    /** Downloads a creation's images into `<outDir>/<rowId>/`; throws DownloadFailed. */
    async downloadImages(input: DownloadImagesInput): Promise<DownloadedImage[]> {
      return download(input);
    },

    /** {@link pollCreation}, then, when the creation succeeded, {@link downloadImages}, in one activity. */
    async collectCreation(input: CollectCreationInput): Promise<CollectCreationResult> {
      const poll = await pollOnce({ creationId: input.creationId });
      if (poll.outcome !== 'succeeded') return { poll, images: [] };
      const images = await download({
        batchId: input.batchId,
        rowId: input.rowId,
        creationId: input.creationId,
        images: poll.images,
        outDir: input.outDir,
      });
      return { poll, images };
    },

    /** GET the model catalog (prices in USD per request where the service says them). */
    async fetchModels(): Promise<ModelInfo[]> {
      const ctx = Context.current();
      const outcome = await whileHeartbeating(ctx, api().listModels(ctx.cancellationSignal));
      switch (outcome.kind) {
        case 'models':
          return outcome.models;
        case 'ambiguous':
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

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
