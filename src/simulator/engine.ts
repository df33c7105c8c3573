import { createHash } from 'node:crypto';
import { ErrorCode, type StatusNamingName } from '../api/contract';
import { KeyRing, type Principal } from './auth';
import { Billing } from './billing';
import { retryAfterSeconds } from './clock';
import { IdempotencyVariant, type SimulatorConfig } from './config';
import { newCreation, type CreationStart } from './creation-start';
import { CreationStore, creationRecord, newCreationId, Phase, phaseAt, type Creation } from './creations';
import { FaultKind, FaultPlan } from './faults';
import { IdempotencyStore } from './idempotency';
import { imageOf } from './files';
import { acceptedDelivery, chargeRefusalResponse, SEND, type Judged } from './judgement';
import { modelRecord } from './pricing';
import { withRecordExtras } from './record-extras';
import { presentRecord } from './record-shape';
import { CreationOutcome, ChargeBook } from './charges';
import { toMicros } from './money';
import { timingOf, type GenerationTiming } from './generation';
import { hash32, mulberry32, type SeededRandom } from './random';
import { quotaRefusal } from './quota';
import { RateLimiter } from './rate-limit';
import { errorResponse, invalidRequest, retryAfter, type ApiResponse, type Delivery } from './responses';
import { parseBody, type ParsedBody, type SubmitInput } from './submit-body';
import { idempotencyKeyProblem, validateCreationBody } from './validation';
import { readKey } from './key-carrier';
import { notReadable } from './read-lag';

/** The simulator's reply to a request: what to send, how, and what to call once it has gone out. */
export interface Reply {
  response: ApiResponse;
  delivery: Delivery;
  done?: () => void;
}

const MAX_PENDING_WAITS = 1000;

/**
 * The service's rules, independent of HTTP plumbing. Checks run in the order contract-defaults.md gives: authentication
 * (done by the server), rate limit, quota, idempotency look-up, validation, wallet and budget, charge, start.
 */
export class SimulatorEngine {
  readonly keys: KeyRing;
  readonly charges: ChargeBook;
  readonly billing: Billing;
  readonly creations: CreationStore;
  readonly idempotency: IdempotencyStore;
  readonly limiter: RateLimiter;
  readonly faults: FaultPlan;
  private random: SeededRandom;
  private readonly prices: Map<string, number>;
  private readonly timings = new Map<string, GenerationTiming>();
  variant: IdempotencyVariant;
  naming: StatusNamingName;
  filesUrl = '';
  /** The API's base URL (`http://127.0.0.1:<port>/api/public/v1`), for the links a record may carry. */
  apiUrl = '';
  /** Polls of a known creation answered since start: every one, and those refused as sooner than the interval. */
  readonly polls = { answered: 0, tooSoon: 0 };
  closed = false;
  /** Bumped by every change worth saving (a submission judged, a creation finished, a control applied). */
  revision = 0;

  constructor(readonly config: SimulatorConfig) {
    this.random = mulberry32(config.seed);
    this.keys = new KeyRing(config.accounts);
    this.charges = new ChargeBook(config.ledger.maxEntries, () => this.settle());
    this.billing = new Billing(config.accounts, this.charges);
    this.creations = new CreationStore({
      ttlMs: config.creations.ttlMs,
      maxEntries: config.creations.maxEntries,
      onFinish: (c) => this.finish(c),
    });
    this.idempotency = new IdempotencyStore(config.idempotency.ttlMs, config.idempotency.maxEntries);
    this.limiter = new RateLimiter(config.limits.requestsPerSecond, config.limits.burst);
    this.faults = new FaultPlan(config.faults, config.scripts, mulberry32(hash32('faults', config.seed)));
    this.prices = new Map(config.models.map((m) => [m.id, toMicros(m.price_usd)]));
    this.variant = config.idempotency.variant;
    this.naming = config.statusNaming;
  }

  now(): number {
    return this.config.clock.now();
  }

  /** The position of the stream creation ids are drawn from, so that a restart draws no id twice. */
  randomState(): number {
    return this.random.state();
  }

  restoreRandom(state: number): void {
    this.random = mulberry32(state);
  }

  /** Applies every due finish (refunds) and expires old state. Cheap when nothing is due. */
  settle(): void {
    const now = this.now();
    this.creations.settle(now);
    this.idempotency.expire(now);
  }

  private finish(c: Creation): void {
    this.revision++;
    if (c.error === undefined) this.billing.settleSuccess(c.id);
    else this.billing.refund(c.accountId, c.id, c.finishedAt, `creation failed: ${c.error}`, CreationOutcome.Failed);
  }

  /** Rate limit of every authenticated API request. */
  rateLimit(principal: Principal): ApiResponse | undefined {
    const wait = this.limiter.take(principal.keyId, this.now());
    if (wait === undefined) return undefined;
    return errorResponse(
      ErrorCode.RateLimit,
      'Too many requests for this API key.',
      { scope: 'key', reason: 'rate_limit', limit_per_second: this.limiter.perSecond, burst: this.limiter.burst },
      retryAfter(wait),
    );
  }

  models(principal: Principal): ApiResponse {
    const allowed = this.keys.modelsOf(principal.accountId);
    const shown = this.config.models.filter((m) => allowed.has(m.id));
    return {
      status: 200,
      body: { data: shown.map((m) => modelRecord(m, this.config.pricing.fields, this.config.catalog.idField)) },
    };
  }

  poll(principal: Principal, id: string): ApiResponse {
    const now = this.now();
    this.settle();
    const c = this.creations.get(id);
    // A creation its store has not caught up with yet is not found either (config `readLagMs`).
    if (!c || c.accountId !== principal.accountId || notReadable(c, now, this.config)) {
      return errorResponse(ErrorCode.NotFound, 'No creation with this id.', { id });
    }
    const interval = this.config.limits.minPollIntervalMs;
    this.polls.answered++;
    if (c.lastPollAt !== undefined && now - c.lastPollAt < interval) {
      this.polls.tooSoon++;
      return errorResponse(
        ErrorCode.RateLimit,
        'This creation was polled too recently.',
        { scope: 'creation', reason: 'min_poll_interval', min_interval_ms: interval },
        retryAfter(retryAfterSeconds(c.lastPollAt + interval - now)),
      );
    }
    c.lastPollAt = now;
    const inFlight = phaseAt(c, now) === Phase.Queued || phaseAt(c, now) === Phase.Running;
    const hint =
      this.config.limits.inFlightRetryAfter === true && inFlight ? retryAfter(retryAfterSeconds(interval)) : {};
    return { status: 200, body: this.record(c), headers: hint };
  }

  /**
   * The creation record as GET /creations/{id} shows it now: in the status naming, with its cost as priced, its
   * status and images where `records` puts them.
   */
  record(c: Creation): object {
    const now = this.now();
    const record = creationRecord(c, now, this.naming, this.filesUrl);
    const origins = { api: this.apiUrl, files: this.filesUrl };
    const shown = withRecordExtras(record, c, now, this.config.records, origins);
    return presentRecord(shown, this.config, true, (n) => imageOf(c, n));
  }

  async submit(principal: Principal, input: SubmitInput): Promise<Reply> {
    const limited = this.rateLimit(principal);
    if (limited) return { response: limited, delivery: SEND };
    this.settle();
    const parsed = parseBody(input, this.config.maxBodyBytes);
    const quota = quotaRefusal(this.creations, this.config.limits, principal.accountId, parsed, this.now());
    if (quota) return { response: quota, delivery: SEND };

    const read = readKey(input.headers, parsed, this.config.idempotency);
    if (read.problem) {
      return { response: invalidRequest([{ field: read.where, message: read.problem }]), delivery: SEND };
    }
    const idempotencyKey = read.honoured;
    if (idempotencyKey === undefined) return this.judged(this.judge(principal, read.body, read.sent ?? null));

    const problem = idempotencyKeyProblem(idempotencyKey);
    if (problem) return { response: invalidRequest([{ field: read.where, message: problem }]), delivery: SEND };
    const scope = `${principal.accountId}\n${idempotencyKey}`;
    const fingerprint = createHash('sha256').update(input.body).digest('base64');
    for (let waits = 0; ; waits++) {
      const found = this.idempotency.lookup(scope, fingerprint, this.now());
      if (found.kind === 'pending') {
        if (waits >= MAX_PENDING_WAITS || this.closed) {
          return { response: errorResponse(ErrorCode.Internal, 'Simulator is shutting down.'), delivery: SEND };
        }
        await found.done;
        continue;
      }
      if (found.kind === 'replay') {
        const replay = this.sent(found.response);
        return {
          response: { ...replay, headers: { ...replay.headers, 'idempotent-replayed': 'true' } },
          delivery: SEND,
        };
      }
      if (found.kind === 'mismatch') {
        return {
          response: invalidRequest(
            [{ field: read.where, message: 'was already used with a different request body' }],
            'The idempotency key was already used with a different request.',
          ),
          delivery: SEND,
        };
      }
      break;
    }
    const release = this.idempotency.begin(scope);
    try {
      const judged = this.judge(principal, read.body, idempotencyKey);
      if (judged.store) this.idempotency.store(scope, fingerprint, judged.store, this.now());
      return { ...this.judged(judged), done: release };
    } catch (err) {
      release();
      throw err;
    }
  }

  private judged(j: Judged): Reply {
    return { response: this.sent(j.response), delivery: j.delivery };
  }

  /**
   * A submit response as sent: a 202's creation record (stored in contract-defaults.md's form) with its cost as priced and its
   * status and images where `records` puts them.
   */
  private sent(response: ApiResponse): ApiResponse {
    const body = response.body;
    if (response.status !== 202 || typeof body !== 'object' || body === null) return response;
    // A 202 shows the creation queued: no image yet, whatever the shape.
    const shown = presentRecord(body, this.config, this.config.pricing.costOn === 'always', () => {
      throw new Error('a 202 shows no image');
    });
    return { ...response, body: shown };
  }

  /** Validation, wallet and budget, charge, start: the steps whose responses variant (b) stores. */
  private judge(principal: Principal, parsed: ParsedBody, idempotencyKey: string | null): Judged {
    this.revision++;
    const allJudged = this.variant === IdempotencyVariant.AllJudged;
    const final = (response: ApiResponse): Judged => ({
      response,
      store: allJudged ? response : undefined,
      delivery: SEND,
    });
    if (!parsed.ok) return final(invalidRequest([parsed.problem]));
    const validation = validateCreationBody(parsed.value, this.config.requestLayout);
    if (!validation.ok) return final(invalidRequest(validation.errors));
    const request = validation.value;
    const unitPrice = this.prices.get(request.model);
    if (unitPrice === undefined || !this.keys.modelsOf(principal.accountId).has(request.model)) {
      return final(
        errorResponse(ErrorCode.ModelNotFound, `Model "${request.model}" is not available to this account.`, {
          model: request.model,
        }),
      );
    }
    const now = this.now();
    const micros = unitPrice * request.numImages;
    const refusal = this.billing.check(principal.accountId, principal.keyId, micros, now);
    if (refusal) return final(chargeRefusalResponse(refusal, this.config.topUpUrl));

    const fault = this.faults.next(request.prompt);
    if (fault.kind === FaultKind.InternalBeforeCharge) {
      return final(errorResponse(ErrorCode.Internal, 'Internal error.'));
    }
    const id = newCreationId(now, this.random);
    this.billing.charge({ ...principal, creationId: id, idempotencyKey, micros, now });
    if (fault.kind === FaultKind.GenerationFailed) {
      this.billing.refund(principal.accountId, id, now, 'generation failed (502)', CreationOutcome.Rejected);
      return final(
        errorResponse(ErrorCode.GenerationFailed, 'Generation failed. The charge was refunded in full.', {
          refunded_usd: micros / 1_000_000,
        }),
      );
    }
    if (fault.kind === FaultKind.ProviderUnavailable) {
      this.billing.refund(principal.accountId, id, now, 'provider unavailable (503)', CreationOutcome.Rejected);
      const seconds = this.faults.settings.providerRetryAfterSeconds;
      return final(
        errorResponse(
          ErrorCode.ProviderUnavailable,
          'The image provider is temporarily unavailable. The charge was refunded in full.',
          { refunded_usd: micros / 1_000_000 },
          retryAfter(seconds),
        ),
      );
    }

    const creation = this.start({ principal, request, id, micros, idempotencyKey, fault, now });
    const accepted: ApiResponse = {
      status: 202,
      body: creationRecord(creation, now, this.naming, this.filesUrl),
    };
    return acceptedDelivery(fault, accepted, allJudged, this.faults.settings.slow.delayMs);
  }

  /** The generation timing of a model (resolved once per model). */
  private timing(model: string): GenerationTiming {
    let timing = this.timings.get(model);
    if (!timing) {
      timing = timingOf(this.config.generation, model);
      this.timings.set(model, timing);
    }
    return timing;
  }

  /** Starts the accepted creation: its whole future fixed now (see {@link newCreation}). */
  private start(start: CreationStart): Creation {
    const creation = newCreation(start, this.timing(start.request.model), this.config);
    this.creations.add(creation);
    this.charges.register(start.id, CreationOutcome.InFlight);
    return creation;
  }
}
