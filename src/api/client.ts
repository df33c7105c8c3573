import type { Dispatcher } from 'undici';
import type { CreationRequest, SubmitCreationInput } from '../model';
import { AuthHeaderStyle, type ServiceConfig } from './service-config';
import { ApiKeyError, assertApiKeyFormat, keyFingerprint, type ApiKeyProvider } from './api-key';
import { classifyResponse, RequestKind, type Outcome } from './classify';
import { ErrorCode } from './contract';
import { HoldRegistry, Pacer } from './holds';
import { LocalHoldCode, localHold, QUOTA_RECHECK_MS } from './local-hold';
import type { QuotaGate, QuotaTicket } from './quota-gate';
import { createServiceDispatcher, send } from './http';
import { inFlightHint, pollRefused, pollSent, type PollSent } from './poll-waits';
import { redactJsonValue, redactRawText } from './redact';
import { buildRequestBody, DEFAULT_REQUEST_SHAPE, RequestShapeError, type RequestShape } from './request-shape';
import { keyHeaders } from './key-carrier';

/** What the client logs to; the messages and fields never contain the key. */
export interface Logger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

const noop = () => undefined;
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** An outcome, or a local configuration problem that stopped the request before it was sent. */
export type ClientOutcome = Outcome | { kind: 'config'; message: string };
export { LocalHoldCode };

export interface ImageApiClientOptions {
  config: ServiceConfig;
  /** Returns the API key; its format is checked before every request. */
  apiKey: ApiKeyProvider;
  /**
   * The dispatcher for `{base_url}` (tests pass a MockAgent or a pool on a loopback server).
   * @default a Pool on the base URL's origin, with the configured timeouts (closed by {@link ImageApiClient.close})
   */
  dispatcher?: Dispatcher;
  /** @default Date.now */
  now?: () => number;
  /** @default silentLogger */
  logger?: Logger;
  /**
   * Holds shared by every request of this process.
   * @default a new registry
   */
  holds?: HoldRegistry;
  /** Sub-second waits of the pacer. @default setTimeout */
  sleep?: (ms: number) => Promise<void>;
}

/** The longest wait the pacer sleeps in process; anything longer becomes an activity retry. */
const MAX_IN_PROCESS_WAIT_MS = 999;

/**
 * The image-service client: one call, at most one request, one {@link Outcome}. It never throws for anything
 * the service or the network does (only for programming errors and activity cancellation), and never
 * retries or sleeps for a second or more: waiting is the activity's retry.
 */
export class ImageApiClient {
  readonly config: ServiceConfig;
  readonly holds: HoldRegistry;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly now: () => number;
  private readonly logger: Logger;
  private readonly apiKey: ApiKeyProvider;
  private readonly pacer: Pacer | undefined;
  /** What learns the key's rate and the account's quota from 429s; undefined while `learnLimits` is off. */
  private readonly learner: Pick<HoldRegistry, 'rateOf' | 'quotaOf'> | undefined;
  private readonly sleep: (ms: number) => Promise<void>;
  /** When the pace last made a request wait, if ever. */
  private lastPacedAt: number | undefined;
  /** When the learnt quota last made a submission wait, if ever. */
  private lastGatedAt: number | undefined;

  constructor(options: ImageApiClientOptions) {
    this.config = options.config;
    this.apiKey = options.apiKey;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher = options.dispatcher ?? createServiceDispatcher(options.config);
    this.now = options.now ?? Date.now;
    this.logger = options.logger ?? silentLogger;
    this.holds = options.holds ?? new HoldRegistry();
    this.learner = options.config.learnLimits ? this.holds : undefined;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.pacer =
      options.config.clientRatePerSec > 0
        ? new Pacer(options.config.clientRatePerSec, options.config.clientRateBurst, this.now())
        : undefined;
  }

  /** POST {base_url}/creations with the idempotency key, in its header or its body field (`keyCarrierOf`). */
  async submit(input: SubmitCreationInput, signal?: AbortSignal): Promise<ClientOutcome> {
    const keyProblem = idempotencyKeyProblem(input.idempotencyKey);
    if (keyProblem) return { kind: 'config', message: `invalid idempotency key: ${keyProblem}` };
    let body: string;
    try {
      body = JSON.stringify(buildRequestBody(input.request, this.config, input.idempotencyKey));
    } catch (err) {
      if (err instanceof RequestShapeError) return { kind: 'config', message: err.message };
      throw err;
    }
    return this.call(RequestKind.Submit, this.url(this.config.submitPath), {
      method: 'POST',
      body,
      extraHeaders: { ...keyHeaders(this.config, input.idempotencyKey), 'content-type': 'application/json' },
      signal,
      log: { idempotencyKey: input.idempotencyKey },
    });
  }

  /** GET {base_url}/creations/{id}. */
  async getCreation(creationId: string, signal?: AbortSignal): Promise<ClientOutcome> {
    const path = this.config.creationPath.replace('{id}', encodeURIComponent(creationId));
    return this.call(RequestKind.Poll, this.url(path), { method: 'GET', signal, creationId, log: { creationId } });
  }

  /** GET {base_url}/models. */
  async listModels(signal?: AbortSignal): Promise<ClientOutcome> {
    return this.call(RequestKind.Models, this.url(this.config.modelsPath), { method: 'GET', signal, log: {} });
  }

  /** The wait between two polls of one creation: the configured minimum, or longer when the service said so. */
  pollIntervalMs(): number {
    return Math.max(this.config.minPollIntervalMs, this.holds.pollIntervalMs);
  }

  /** Closes the dispatcher if this client created it. */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private url(path: string): string {
    return `${this.config.baseUrl}${path}`;
  }

  private async call(
    kind: RequestKind,
    url: string,
    req: {
      method: 'GET' | 'POST';
      body?: string;
      extraHeaders?: Record<string, string>;
      signal: AbortSignal | undefined;
      creationId?: string;
      log: Record<string, unknown>;
    },
  ): Promise<ClientOutcome> {
    let key: string;
    try {
      key = assertApiKeyFormat(this.apiKey());
    } catch (err) {
      // ApiKeyError messages never quote the key; anything else is described by its code only.
      const message = err instanceof ApiKeyError ? err.message : 'the API key is unavailable';
      return { kind: 'config', message };
    }
    const keyId = keyFingerprint(key);
    const started = this.now();

    const held = Math.max(
      this.holds.keyHoldLeft(keyId, started),
      kind === RequestKind.Submit ? this.holds.submitHoldLeft(keyId, started) : 0,
      req.creationId === undefined ? 0 : this.holds.creationHoldLeft(req.creationId, started),
    );
    if (held > 0) {
      this.logger.debug('image api: request held back locally', { kind, keyId, waitMs: held, ...req.log });
      return localHold(held);
    }
    let ticket: QuotaTicket | undefined;
    if (kind === RequestKind.Submit && this.learner) {
      ticket = await this.enterQuota(this.learner.quotaOf(keyId), req.signal);
      if (ticket === undefined) return localHold(QUOTA_RECHECK_MS, LocalHoldCode.Quota);
    }
    const paced = await this.pace(keyId);
    if (paced > 0) {
      this.lastPacedAt = this.now();
      if (ticket) ticket.gate.answered(ticket, this.now());
      return localHold(paced, LocalHoldCode.Rate);
    }

    const authHeader: Record<string, string> =
      this.config.authHeader === AuthHeaderStyle.XApiKey ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
    const sentAt = this.now();
    const { minPollIntervalMs } = this.config;
    const poll =
      req.creationId === undefined
        ? undefined
        : pollSent(
            this.holds,
            { creationId: req.creationId, sentAtMs: sentAt, minPollIntervalMs },
            this.pollIntervalMs(),
          );

    const res = await send({
      dispatcher: this.dispatcher,
      url,
      method: req.method,
      headers: { accept: 'application/json', 'user-agent': 'imagebatch', ...req.extraHeaders, ...authHeader },
      ...(req.body === undefined ? {} : { body: req.body }),
      ...(req.signal ? { signal: req.signal } : {}),
      headersTimeoutMs: this.config.headersTimeoutMs,
      bodyTimeoutMs: this.config.bodyTimeoutMs,
      maxBytes: this.config.maxResponseBytes,
    });
    if (req.signal?.aborted) throw req.signal.reason ?? new Error('cancelled');

    const now = this.now();
    // The key and its token are redacted from the raw text in every spelling JSON allows (escapes that JSON.parse
    // would turn back into the key), then from every string of what the classifier made of it, which is what
    // reaches workflow history, results and logs.
    const classified = classifyResponse({
      kind,
      ...(res.status === undefined ? {} : { status: res.status, headers: res.headers ?? {} }),
      ...(res.body === undefined ? {} : { body: redactRawText(res.body, key) }),
      ...(res.error === undefined ? {} : { error: redactRawText(res.error, key) }),
      ...(res.status === undefined && res.notSent ? { notSent: true } : {}),
      nowMs: now,
      successStatuses: this.config.successStatuses,
      costFields: this.config.costFields,
      priceFields: this.config.priceFields,
      idFields: this.config.idFields,
      statusFields: this.config.statusFields,
      errorFields: this.config.errorFields,
      imageFields: this.config.imageFields,
      imageDiscovery: this.config.imageDiscovery,
      pendingStatuses: this.config.pendingStatuses,
      modelIdFields: this.config.modelIdFields,
      maxDownloadBytes: this.config.maxDownloadBytes,
      defaultRetryAfterMs: this.config.defaultRetryAfterMs,
    });
    const outcome = this.markProbe(redactJsonValue(classified, key), keyId, ticket);
    if (ticket) ticket.gate.answered(ticket, now, outcome.kind === 'accepted' ? outcome.creationId : undefined);
    if (res.status !== undefined && res.status !== 429) this.learner?.rateOf(keyId).passedAt(sentAt);
    this.afterResponse(kind, outcome, keyId, now, poll);
    this.logger[outcome.kind === 'accepted' || outcome.kind === 'ended' ? 'info' : 'debug']('image api: response', {
      kind,
      httpStatus: res.status,
      outcome: outcome.kind,
      keyId,
      ms: now - started,
      ...req.log,
    });
    return outcome;
  }

  /** Records the waits the service asked for. */
  private afterResponse(
    kind: RequestKind,
    outcome: Outcome,
    keyId: string,
    now: number,
    poll: PollSent | undefined,
  ): void {
    const creationId = poll?.creationId;
    switch (outcome.kind) {
      case 'rateLimited':
        // A poll's 429 never cuts the learnt pace: the key's next submission meets the key's rate if that binds.
        if (kind === RequestKind.Poll && outcome.httpStatus === 429 && poll)
          pollRefused(this.holds, outcome, poll, now);
        else if (outcome.httpStatus === 429 && outcome.code === ErrorCode.QuotaExceeded) {
          // The quota counts creations: polls go on, and find the places that free.
          this.learner?.quotaOf(keyId).exceeded(now, outcome.retryAfterMs);
          this.holds.holdSubmissions(keyId, now + outcome.retryAfterMs);
          this.logger.info('image api: submissions held', { keyId, waitMs: outcome.retryAfterMs });
        } else {
          if (outcome.httpStatus === 429) this.learntPace(keyId, now, outcome.retryAfterMs);
          this.holds.holdKey(keyId, now + outcome.retryAfterMs);
          this.logger.info('image api: key held', {
            keyId,
            waitMs: outcome.retryAfterMs,
            httpStatus: outcome.httpStatus,
          });
        }
        return;
      case 'refunded':
        if (creationId !== undefined) this.learner?.quotaOf(keyId).ended(creationId);
        if (outcome.details.retryAfterMs !== undefined) this.holds.holdKey(keyId, now + outcome.details.retryAfterMs);
        return;
      case 'ambiguous':
        if (outcome.retryAfterMs !== undefined) this.holds.holdKey(keyId, now + outcome.retryAfterMs);
        return;
      case 'inFlight':
        if (creationId !== undefined) this.learner?.quotaOf(keyId).seen(creationId, now);
        if (poll) inFlightHint(this.holds, outcome, poll, now);
        return;
      case 'ended':
      case 'rejected':
      case 'notFound':
        if (creationId !== undefined) this.learner?.quotaOf(keyId).ended(creationId);
        return;
      case 'notSent':
      case 'accepted':
      case 'models':
      case 'batchStop':
      case 'malformed':
        return;
    }
  }

  /**
   * A place under the learnt quota for a submission, waiting in process (at most {@link MAX_IN_PROCESS_WAIT_MS})
   * for a poll to free one; undefined when none freed in time.
   */
  private async enterQuota(gate: QuotaGate, signal: AbortSignal | undefined): Promise<QuotaTicket | undefined> {
    const until = this.now() + MAX_IN_PROCESS_WAIT_MS;
    for (;;) {
      const ticket = gate.enter(this.now());
      if (ticket) return ticket;
      this.lastGatedAt = this.now();
      const left = until - this.now();
      if (left <= 0 || !(await gate.waitForPlace(left, signal))) return undefined;
    }
  }

  /** A 429 that answers the worker's own probe above what it learnt says so (see `RateLimitedInfo.probe`). */
  private markProbe(outcome: Outcome, keyId: string, ticket: QuotaTicket | undefined): Outcome {
    if (outcome.kind !== 'rateLimited' || outcome.httpStatus !== 429) return outcome;
    const probe =
      outcome.code === ErrorCode.QuotaExceeded ? ticket?.probe === true : this.learner?.rateOf(keyId).probing === true;
    return probe ? { ...outcome, probe } : outcome;
  }

  /** A 429 of the key's rate, holding the key for `holdMs`: the learnt pace is cut, and the log says to what. */
  private learntPace(keyId: string, now: number, holdMs: number): void {
    const rate = this.learner?.rateOf(keyId);
    if (!rate) return;
    const before = rate.perSecond;
    rate.limited(now, holdMs);
    if (rate.perSecond !== before) {
      this.logger.info('image api: pace learnt from a 429', { keyId, perSecond: Number(rate.perSecond?.toFixed(2)) });
    }
  }

  /** Sleeps a sub-second wait of the pacer (fixed or learnt); returns a longer one, not slept (0: go). */
  private async pace(keyId: string): Promise<number> {
    const pacer = this.pacer ?? this.learner?.rateOf(keyId);
    if (!pacer) return 0;
    const wait = pacer.take(this.now());
    if (wait > MAX_IN_PROCESS_WAIT_MS) {
      pacer.refund();
      return wait;
    }
    if (wait > 0) {
      this.lastPacedAt = this.now();
      await this.sleep(wait);
    }
    return 0;
  }

  /** Whether the pace (fixed or learnt) made a request wait at or after `sinceMs`: the key's rate binds. */
  pacedSince(sinceMs: number): boolean {
    return this.lastPacedAt !== undefined && this.lastPacedAt >= sinceMs;
  }

  /** Whether the learnt quota made a submission wait at or after `sinceMs`: the account's quota binds. */
  gatedSince(sinceMs: number): boolean {
    return this.lastGatedAt !== undefined && this.lastGatedAt >= sinceMs;
  }
}

/**
 * The request's content: the submit body without the idempotency key (`buildRequestBody`, each step in a fixed
 * order), what its fingerprint is made of. Without `shape`: the documented body. Throws `RequestShapeError` when a
 * row's field is where a request field or the key goes.
 */
export function requestBody(r: CreationRequest, shape: RequestShape = DEFAULT_REQUEST_SHAPE): Record<string, unknown> {
  return buildRequestBody(r, shape);
}

/** contract-defaults.md: 1..255 printable ASCII characters. */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key.length === 0) return 'empty';
  if (key.length > 255) return `${key.length} characters (at most 255)`;
  if (!/^[\x20-\x7e]+$/.test(key)) return 'contains characters other than printable ASCII';
  return undefined;
}

/** A client made at its first use, with the given options (undefined ones left out): one per activity group. */
export function lazyClient(options: {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  now: () => number;
  logger: Logger;
  dispatcher?: Dispatcher | undefined;
  holds?: HoldRegistry | undefined;
}): () => ImageApiClient {
  let client: ImageApiClient | undefined;
  return () =>
    (client ??= new ImageApiClient({
      config: options.config,
      apiKey: options.apiKey,
      now: options.now,
      logger: options.logger,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      ...(options.holds ? { holds: options.holds } : {}),
    }));
}
