import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { ApiKeyError, assertApiKeyFormat, keyFingerprint, type ApiKeyProvider } from '../api/api-key';
import { ImageApiClient, idempotencyKeyProblem, type ClientOutcome } from '../api/client';
import { API_PREFIX, ErrorCode } from '../api/contract';
import { BatchStopReason, type ImageRef, type ModelInfo, type PollCreationResult } from '../model';
import { createServiceDispatcher, send } from '../api/http';
import { readUsd } from '../api/money';
import { redactJsonValue, redactRawText } from '../api/redact';
import { parseJson } from '../api/schemas';
import { AuthHeaderStyle, SERVICE_CONFIG_ENV, type ServiceConfig } from '../config/service-config';
import { downloadImages, guardedDownloadDispatcher } from './download';
import { whileHeartbeating } from './heartbeat';

/**
 * `imagebatch doctor`: checks a service with the settings and the key of whoever runs it (a worker, through
 * `doctorWorkflow`, or the CLI itself with `--local`), without spending: the key's format, the base URL, the
 * authentication, the catalog and its prices, the creation path (a made-up id must get the documented 404
 * ERR_NOT_FOUND), the image host. With `spendOne`, ONE creation is submitted under an idempotency key the user can see
 * and a re-run reuses, followed, its record's shape (keys only) and its mapping shown, and its images saved.
 *
 * Every finding is data of the report, never a thrown error, and nothing in it holds the key: a fingerprint at most.
 */

/** What a check found: `FAIL` would break a batch; `warn` and `guess` would not. */
export const CheckResult = {
  Ok: 'ok',
  Warn: 'warn',
  Guess: 'guess',
  Fail: 'FAIL',
  Skipped: 'skipped',
} as const;
export type CheckResult = (typeof CheckResult)[keyof typeof CheckResult];

export interface DoctorCheck {
  /** Short name: `api key`, `base URL`, `authentication`, ... */
  name: string;
  result: CheckResult;
  /** What was found (or guessed), in one line. */
  found: string;
  /** What to do about it, when something is to be done. */
  hint?: string;
  /** The user's input is wrong (a model the account lacks): nothing was submitted. */
  invalidInput?: true;
  /**
   * A failure that only a real creation can settle (the creation path, when a made-up id and a made-up endpoint are
   * answered alike): `--spend-one` still runs, and its poll turns the check ok, or leaves it failed.
   */
  spendOneSettles?: true;
}

/** The paid test of `doctor --spend-one`. */
export interface SpendOneOptions {
  model: string;
  /** Names the test: the idempotency key is `imagebatch-doctor/<testId>/<model>`. */
  testId: string;
  /** Folder of the record (`doctor-spend-one.json`) and the images; relative to the runner's output root. */
  outDir: string;
  /** Longest wait for the creation to end. */
  maxWaitMs: number;
}

export interface DoctorOptions {
  spendOne?: SpendOneOptions;
}

export interface SpendOneReport {
  idempotencyKey: string;
  creationId?: string;
  /** True when the creation came from the record of an earlier run: nothing was submitted. */
  fromRecord?: boolean;
  /** The service said the acceptance was a replay (nothing charged again), when it says so. */
  replayed?: boolean;
  /** The polled record's key paths (`images[].url`); never a value. */
  recordShape?: string[];
  outcome?: PollCreationResult['outcome'];
  status?: string;
  costUsd?: number;
  /** Images saved, as absolute paths on the machine that ran the checks. */
  saved?: string[];
}

export interface DoctorReport {
  /** Who ran the checks: `worker 1234@host` or `this process`. */
  ranOn: string;
  checks: DoctorCheck[];
  /** The models of the catalog, when it was read. */
  models?: ModelInfo[];
  spendOne?: SpendOneReport;
}

export interface DoctorDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  /** @default a pool on the base URL's origin (closed at the end) */
  dispatcher?: Dispatcher;
  /** @default the guarded download dispatcher of the batches */
  downloadDispatcher?: Dispatcher;
  /** Folder that a relative `outDir` is resolved against. */
  outputRoot: string;
  /** @default Date.now */
  now?: () => number;
  /** @default setTimeout, cut short by `signal` */
  sleep?: (ms: number) => Promise<void>;
  signal?: AbortSignal;
  /** @default 'this process' */
  ranOn?: string;
}

/** The record of paid tests: one entry per idempotency key, written before the request leaves. */
export const SPEND_ONE_RECORD = 'doctor-spend-one.json';
/** The fixed prompt of the paid test: specific, so that no safety filter declines it as too generic. */
export const SPEND_ONE_PROMPT = 'imagebatch doctor test: a red apple on a wooden table by a window, studio photo';
/** Longest `Retry-After` doctor waits out in place; a longer one is reported. */
const MAX_WAIT_IN_PLACE_MS = 60_000;
/** Models listed in one line of the report. */
const MODELS_SHOWN = 12;
/** Key paths of a record shown at most. */
const SHAPE_PATHS = 60;

/** The idempotency key of a paid test: visible, and the same on every re-run with the same test id and model. */
export function spendOneKey(testId: string, model: string): string {
  return `imagebatch-doctor/${testId}/${model}`;
}

/** The report of a settings problem found before any check could run (the runner's configuration). */
export function settingsProblemReport(problem: string, ranOn = 'this process'): DoctorReport {
  return {
    ranOn,
    checks: [
      {
        name: 'settings',
        result: CheckResult.Fail,
        found: problem,
        hint: 'fix the variable named (see docs/settings.md); nothing was sent',
      },
    ],
  };
}

/** True when no check failed. */
export function doctorPassed(report: DoctorReport): boolean {
  return report.checks.every((c) => c.result !== CheckResult.Fail);
}

/** Runs the checks; never throws for anything the service, the network or the settings do. */
export async function runDoctorChecks(deps: DoctorDeps, options: DoctorOptions = {}): Promise<DoctorReport> {
  const now = deps.now ?? Date.now;
  const sleep = deps.sleep ?? ((ms: number) => abortableSleep(ms, deps.signal));
  const { config } = deps;
  const checks: DoctorCheck[] = [];
  const report: DoctorReport = { ranOn: deps.ranOn ?? 'this process', checks };
  const add = (check: DoctorCheck) => checks.push(check);
  const settle = (check: DoctorCheck) => {
    const at = checks.findIndex((c) => c.name === check.name && c.spendOneSettles);
    if (at >= 0) checks[at] = check;
  };
  const skipRest = (names: string[], why: string) => {
    for (const name of names) add({ name, result: CheckResult.Skipped, found: why });
  };

  const header = config.authHeader === AuthHeaderStyle.XApiKey ? 'X-API-Key' : 'Authorization: Bearer';
  add({
    name: 'settings',
    result: CheckResult.Ok,
    found:
      `base URL ${config.baseUrl}; key sent as ${header}; paths: submit ${config.submitPath}, creation ` +
      `${config.creationPath}, models ${config.modelsPath}; polls at least ${config.minPollIntervalMs} ms apart`,
  });

  // The key: only its format and a fingerprint, never any part of it.
  let key: string;
  try {
    key = assertApiKeyFormat(deps.apiKey());
  } catch (err) {
    add({
      name: 'api key',
      result: CheckResult.Fail,
      found: err instanceof ApiKeyError ? err.message : 'the API key could not be read',
      hint: 'set IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE to the key from the portal (<prefix>live_<40 letters or digits>)',
    });
    skipRest(['base URL', 'authentication', 'models', 'prices', 'creation path', 'image host'], 'needs a usable key');
    return report;
  }
  const prefixLength = key.lastIndexOf('live_');
  add({
    name: 'api key',
    result: CheckResult.Ok,
    found: `well-formed: a ${prefixLength}-character prefix, live_ and 40 letters or digits; fingerprint ${keyFingerprint(key)} (first 12 hex digits of its SHA-256)`,
  });

  const ownsDispatcher = deps.dispatcher === undefined;
  const dispatcher = deps.dispatcher ?? createServiceDispatcher(config);
  const client = new ImageApiClient({ config, apiKey: () => key, dispatcher, now });
  try {
    const models = await checkService({ config, client, dispatcher, key, header, now, sleep, add, skipRest });
    if (models === undefined) return report;
    report.models = models;
    const blocking = report.checks.filter(
      (c) => c.result === CheckResult.Fail && !(options.spendOne && c.spendOneSettles),
    );
    if (blocking.length > 0) {
      if (options.spendOne) skipRest(['spend one'], 'nothing submitted: fix the failed checks first');
      return report;
    }
    if (!options.spendOne) {
      add({
        name: 'image host',
        result: CheckResult.Guess,
        found: `not knowable without a creation (doctor --spend-one shows it); downloads go without the key to public addresses, the base URL's host${config.downloadAllowHosts.length > 0 ? ` and ${config.downloadAllowHosts.join(', ')}` : ''}`,
        hint: `an image host on a private or loopback address needs ${SERVICE_CONFIG_ENV.downloadAllowHosts}`,
      });
      return report;
    }
    report.spendOne = await spendOne({
      deps,
      options: options.spendOne,
      client,
      dispatcher,
      key,
      models,
      now,
      sleep,
      add,
      settle,
    });
    return report;
  } finally {
    if (ownsDispatcher) await dispatcher.close();
  }
}

interface CheckContext {
  config: ServiceConfig;
  client: ImageApiClient;
  dispatcher: Dispatcher;
  key: string;
  header: string;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  add: (check: DoctorCheck) => void;
  skipRest: (names: string[], why: string) => void;
}

/** A free request, again once after a short Retry-After. */
async function freeRequest(ctx: CheckContext, request: () => Promise<ClientOutcome>): Promise<ClientOutcome> {
  const first = await request();
  if (first.kind !== 'rateLimited' || first.retryAfterMs > MAX_WAIT_IN_PLACE_MS) return first;
  await ctx.sleep(first.retryAfterMs);
  return request();
}

/** Base URL, authentication, catalog, prices and creation path. The models, or undefined when the rest cannot run. */
async function checkService(ctx: CheckContext): Promise<ModelInfo[] | undefined> {
  const { config, add } = ctx;
  const baseUrl = new URL(config.baseUrl);
  const modelsUrl = `${config.baseUrl}${config.modelsPath}`;
  const expectedPrefix = baseUrl.pathname.replace(/\/+$/, '').endsWith(API_PREFIX);
  const started = ctx.now();
  const outcome = await freeRequest(ctx, () => ctx.client.listModels());
  const ms = ctx.now() - started;
  const pathGuess = expectedPrefix ? '' : ` (the interface's {base_url} ends in ${API_PREFIX}; this one does not)`;

  if (outcome.kind === 'config') {
    add({ name: 'base URL', result: CheckResult.Fail, found: outcome.message });
    ctx.skipRest(['authentication', 'models', 'prices', 'creation path', 'image host'], 'the request was not sent');
    return undefined;
  }
  const httpStatus = 'httpStatus' in outcome ? outcome.httpStatus : undefined;
  const statusOf = (o: ClientOutcome) =>
    o.kind === 'batchStop' ? o.details.httpStatus : 'httpStatus' in o ? o.httpStatus : undefined;
  if (statusOf(outcome) === undefined && (outcome.kind === 'ambiguous' || outcome.kind === 'notSent')) {
    add({
      name: 'base URL',
      result: CheckResult.Fail,
      found: `not reachable: GET ${modelsUrl}: ${outcome.lastError}`,
      hint: `check ${SERVICE_CONFIG_ENV.baseUrl} (host, port, http or https) and that this machine can reach it`,
    });
    ctx.skipRest(['authentication', 'models', 'prices', 'creation path', 'image host'], 'the service was not reached');
    return undefined;
  }
  if (outcome.kind === 'malformed' && httpStatus === 404) {
    add({
      name: 'base URL',
      result: CheckResult.Fail,
      found: `reachable, but GET ${modelsUrl} answered HTTP 404 (${outcome.lastError}): no catalog at this address${pathGuess}`,
      hint: `check the path of ${SERVICE_CONFIG_ENV.baseUrl} (and ${SERVICE_CONFIG_ENV.modelsPath} if it is set)`,
    });
    ctx.skipRest(['authentication', 'models', 'prices', 'creation path', 'image host'], 'the base URL is wrong');
    return undefined;
  }
  add({
    name: 'base URL',
    result: expectedPrefix ? CheckResult.Ok : CheckResult.Warn,
    found: `reachable: GET ${modelsUrl} answered HTTP ${statusOf(outcome) ?? 200} in ${ms} ms${pathGuess}`,
  });

  if (outcome.kind === 'batchStop') {
    add(authFailure(outcome.details.reason, outcome.details.httpStatus, outcome.details.message, ctx));
    ctx.skipRest(['models', 'prices', 'creation path', 'image host'], 'the key was not accepted');
    return undefined;
  }
  if (outcome.kind !== 'models') {
    const why =
      outcome.kind === 'rateLimited'
        ? `HTTP ${outcome.httpStatus} ${outcome.code}: ${outcome.message} (retry after ${outcome.retryAfterMs} ms)`
        : outcome.kind === 'ambiguous' || outcome.kind === 'notSent' || outcome.kind === 'malformed'
          ? outcome.lastError
          : `unexpected ${outcome.kind} answer`;
    add({
      name: 'authentication',
      result: CheckResult.Guess,
      found: `not refused (no 401 or 403 to GET ${config.modelsPath}), but not proven either`,
    });
    add({
      name: 'models',
      result: CheckResult.Fail,
      found: `GET ${config.modelsPath} did not give a catalog: ${why}`,
      hint: 'a batch reads the catalog at its start; run doctor again later, or check the base URL',
    });
    ctx.skipRest(['prices', 'creation path', 'image host'], 'the catalog could not be read');
    return undefined;
  }

  add({
    name: 'authentication',
    result: CheckResult.Ok,
    found: `the key was accepted with ${ctx.header} (GET ${config.modelsPath} answered 200)`,
  });
  const models = outcome.models;
  const shown = models
    .slice(0, MODELS_SHOWN)
    .map((m) => `${m.id} ${m.priceUsd === undefined ? 'unknown' : `$${m.priceUsd}`}`);
  const more = models.length > MODELS_SHOWN ? `, and ${models.length - MODELS_SHOWN} more` : '';
  add(
    models.length === 0
      ? {
          name: 'models',
          result: CheckResult.Fail,
          found: 'the catalog lists no model the account can use',
          hint: 'a batch has no model to run; check the account in the portal',
        }
      : {
          name: 'models',
          result: CheckResult.Ok,
          found: `${models.length} model(s) with price per image: ${shown.join(', ')}${more}`,
        },
  );
  const unpriced = models.filter((m) => m.priceUsd === undefined);
  if (models.length > 0) {
    add(
      unpriced.length === 0
        ? {
            name: 'prices',
            result: CheckResult.Ok,
            found: `every model has a price in the catalog (read at ${SERVICE_CONFIG_ENV.priceFields})`,
          }
        : {
            name: 'prices',
            result: CheckResult.Guess,
            found:
              `unknown for ${unpriced.length === models.length ? 'every model' : unpriced.map((m) => m.id).join(', ')}: ` +
              `no price at ${config.priceFields.slice(0, 4).join(', ')}${config.priceFields.length > 4 ? ', ...' : ''}`,
            hint:
              `batches still run, but spend shows as unknown and --spend-cap needs --price <model>=<usd>; if the ` +
              `catalog shows a price under another name, set ${SERVICE_CONFIG_ENV.priceFields}`,
          },
    );
  }
  await checkCreationPath(ctx);
  return models;
}

/** A 401 or 403, with its detail named and what to do. */
function authFailure(reason: string, httpStatus: number, message: string, ctx: CheckContext): DoctorCheck {
  const what: Record<string, [string, string]> = {
    [BatchStopReason.ApiKeyInvalid]: [
      `the service does not recognize this key (fingerprint ${keyFingerprint(ctx.key)})`,
      'check IMAGEGEN_API_KEY / IMAGEGEN_API_KEY_FILE, or create a new key in the portal (a revoked key answers the same)',
    ],
    [BatchStopReason.AccountDisabled]: [
      'the key is valid but the account is disabled',
      "the account must be enabled again in the service's portal; nothing here can fix it",
    ],
    [BatchStopReason.AuthenticationRequired]: [
      `the service saw no key in ${ctx.header}`,
      `send it in the other header: ${SERVICE_CONFIG_ENV.authHeader}=${ctx.config.authHeader === AuthHeaderStyle.XApiKey ? 'bearer' : 'x-api-key'} (a proxy may drop this one)`,
    ],
  };
  const [found, hint] = what[reason] ?? [`refused: ${message}`, 'check the key and the account in the portal'];
  return { name: 'authentication', result: CheckResult.Fail, found: `HTTP ${httpStatus} ${reason}: ${found}`, hint };
}

/**
 * A made-up id must get the documented 404 with ERR_NOT_FOUND. A 404 without it says the path is wrong; so does the
 * same answer as an endpoint that surely does not exist (a service may use ERR_NOT_FOUND for both).
 */
async function checkCreationPath(ctx: CheckContext): Promise<void> {
  const { config, add } = ctx;
  const madeUp = `imagebatch-doctor-no-such-creation-${randomBytes(6).toString('hex')}`;
  const outcome = await freeRequest(ctx, () => ctx.client.getCreation(madeUp));
  const variable = SERVICE_CONFIG_ENV.creationPath;
  const where = `GET ${config.creationPath.replace('{id}', '<made-up id>')}`;
  if (outcome.kind === 'notFound') {
    const control = new ImageApiClient({
      config: { ...config, creationPath: `/imagebatch-doctor-no-such-endpoint-${randomBytes(4).toString('hex')}/{id}` },
      apiKey: () => ctx.key,
      dispatcher: ctx.dispatcher,
      now: ctx.now,
    });
    let same = false;
    try {
      const other = await freeRequest(ctx, () => control.getCreation(madeUp));
      same = other.kind === 'notFound' && other.code === outcome.code && other.message === outcome.message;
    } finally {
      await control.close();
    }
    add(
      same
        ? {
            name: 'creation path',
            result: CheckResult.Fail,
            found: `${where} answered 404 ${outcome.code} "${outcome.message}", exactly as an endpoint that does not exist does: ${config.creationPath} is probably not the creation endpoint`,
            hint: `set ${variable} to the service's path of a creation (with {id}); if the service answers both alike, doctor --spend-one settles it`,
            spendOneSettles: true,
          }
        : {
            name: 'creation path',
            result: CheckResult.Ok,
            found: `${where} answered the documented 404 ${ErrorCode.NotFound} ("${outcome.message}"): ${config.creationPath} looks up creations`,
          },
    );
    return;
  }
  if (outcome.kind === 'ambiguous' && outcome.unrecognizedNotFound) {
    add({
      name: 'creation path',
      result: CheckResult.Fail,
      found: `${where} answered 404 without the ${ErrorCode.NotFound} envelope (${outcome.lastError}): ${config.creationPath} is probably wrong`,
      hint: `set ${variable} to the service's path of a creation (with {id}); a batch stops after 5 such polls`,
    });
    return;
  }
  const got =
    outcome.kind === 'ended' || outcome.kind === 'inFlight'
      ? 'a creation record (HTTP 200) for an id that cannot exist'
      : outcome.kind === 'ambiguous' || outcome.kind === 'notSent' || outcome.kind === 'malformed'
        ? outcome.lastError
        : outcome.kind === 'batchStop'
          ? `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}`
          : outcome.kind === 'rateLimited'
            ? `HTTP ${outcome.httpStatus} ${outcome.code} (retry after ${outcome.retryAfterMs} ms)`
            : `an unexpected ${outcome.kind} answer`;
  add({
    name: 'creation path',
    result: CheckResult.Fail,
    found: `${where} should answer 404 ${ErrorCode.NotFound}, got ${got}`,
    hint: `check ${variable}`,
  });
}

interface SpendContext {
  deps: DoctorDeps;
  options: SpendOneOptions;
  client: ImageApiClient;
  dispatcher: Dispatcher;
  key: string;
  models: ModelInfo[];
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  add: (check: DoctorCheck) => void;
  /** Turns a check that only a real creation could settle (see {@link DoctorCheck.spendOneSettles}) into `check`. */
  settle: (check: DoctorCheck) => void;
}

interface RecordEntry {
  model: string;
  /** When the key was first sent (ms since the epoch). */
  sentAt: number;
  creationId?: string;
}

/** `--spend-one`: one creation under a visible, re-usable key; its record's shape, its mapping, its images. */
async function spendOne(ctx: SpendContext): Promise<SpendOneReport> {
  const { options, add } = ctx;
  const { config } = ctx.deps;
  const idempotencyKey = spendOneKey(options.testId, options.model);
  const out: SpendOneReport = { idempotencyKey };
  const keyProblem = idempotencyKeyProblem(idempotencyKey);
  if (keyProblem) {
    add({ name: 'spend one', result: CheckResult.Fail, found: `idempotency key ${keyProblem}`, invalidInput: true });
    return out;
  }
  if (!ctx.models.some((m) => m.id === options.model)) {
    add({
      name: 'spend one',
      result: CheckResult.Fail,
      found: `model ${options.model} is not in the account's catalog; nothing was submitted`,
      hint: `pick one of: ${ctx.models.map((m) => m.id).join(', ')}`,
      invalidInput: true,
    });
    return out;
  }
  const window = `${Math.round(config.idempotencyWindowMs / 3_600_000)} h`;
  const outDir = path.resolve(ctx.deps.outputRoot, options.outDir);
  const recordFile = path.join(outDir, SPEND_ONE_RECORD);
  const records = await readRecords(recordFile);
  const known = records[idempotencyKey];
  const deadline = ctx.now() + options.maxWaitMs;

  let creationId = known?.creationId;
  if (creationId !== undefined) {
    out.fromRecord = true;
    add({
      name: 'submission',
      result: CheckResult.Ok,
      found: `not sent: ${recordFile} holds key ${idempotencyKey} with creation ${creationId}; following it (nothing paid again)`,
      hint: `--test-id <another name> pays for a new test`,
    });
  } else {
    if (known && ctx.now() - known.sentAt > config.idempotencyWindowMs) {
      add({
        name: 'submission',
        result: CheckResult.Fail,
        found: `key ${idempotencyKey} was sent ${new Date(known.sentAt).toISOString()} with no known answer, longer ago than the service remembers keys (${window}): sending it again might pay twice`,
        hint: `--test-id <another name> pays for a new test`,
      });
      return out;
    }
    const sentAt = known?.sentAt ?? ctx.now();
    records[idempotencyKey] = { model: options.model, sentAt };
    await writeRecords(recordFile, records);
    const submitted = await submitOne(ctx, idempotencyKey, deadline);
    if (submitted.kind !== 'accepted') {
      add({ name: 'submission', result: CheckResult.Fail, ...submitted.check });
      return out;
    }
    creationId = submitted.creationId;
    out.creationId = creationId;
    if (submitted.replayed !== undefined) out.replayed = submitted.replayed;
    records[idempotencyKey] = { model: options.model, sentAt, creationId };
    await writeRecords(recordFile, records);
    add({
      name: 'submission',
      result: CheckResult.Ok,
      found:
        `HTTP 202, creation ${creationId}, key ${idempotencyKey}` +
        (submitted.replayed === true
          ? ': a replay of the earlier acceptance, nothing charged again'
          : submitted.replayed === false
            ? ': a new creation, charged once'
            : ''),
      hint: `re-running with the same --test-id and model reuses this key (the service replays it for ${window}; ${recordFile} remembers it after that): nothing is paid twice`,
    });
  }
  out.creationId = creationId;

  const polled = await pollUntilEnded(ctx, creationId, deadline);
  if (polled.kind !== 'ended') {
    add({ name: 'poll', result: CheckResult.Fail, ...polled.check });
    return out;
  }
  const { result, shape, record } = polled;
  out.recordShape = shape;
  out.outcome = result.outcome;
  out.status = result.status;
  add({
    name: 'poll',
    result: CheckResult.Ok,
    found: `${polled.polls} poll(s) of ${ctx.deps.config.creationPath.replace('{id}', creationId)}, ${polled.intervalMs} ms or more apart`,
  });
  ctx.settle({
    name: 'creation path',
    result: CheckResult.Ok,
    found: `the paid creation was read at ${ctx.deps.config.creationPath} (a made-up id could not tell)`,
  });
  add(
    shape.length > 0
      ? { name: 'record shape', result: CheckResult.Ok, found: `keys (values not shown): ${shape.join(', ')}` }
      : { name: 'record shape', result: CheckResult.Warn, found: 'the record could not be read again to show it' },
  );
  add({
    name: 'mapped status',
    result: result.outcome === 'succeeded' ? CheckResult.Ok : CheckResult.Warn,
    found:
      result.outcome === 'succeeded'
        ? `"${result.status}" means succeeded (${SERVICE_CONFIG_ENV.successStatuses})`
        : `"${result.status}": the creation failed (refunded): ${result.error} (${result.retryable ? 'retryable' : 'not retryable'})`,
  });
  if (result.costUsd !== undefined) out.costUsd = result.costUsd;
  const costField = config.costFields.find((f) => readUsd(record, [f]) !== undefined);
  add(
    result.costUsd !== undefined
      ? {
          name: 'mapped cost',
          result: CheckResult.Ok,
          found: `$${result.costUsd}, read at ${costField ?? 'a cost field'}`,
        }
      : {
          name: 'mapped cost',
          result: CheckResult.Guess,
          found: `unknown: the record has no cost at ${SERVICE_CONFIG_ENV.costFields} (${config.costFields.slice(0, 4).join(', ')}, ...)`,
          hint: `if one of the keys above holds the cost, set ${SERVICE_CONFIG_ENV.costFields}; else the catalog's price or --price is used`,
        },
  );
  if (result.outcome !== 'succeeded') return out;
  const images = result.images;
  if (images.length === 0) {
    add({
      name: 'mapped images',
      result: CheckResult.Fail,
      found: 'a succeeded creation with no image reference found: a batch would save nothing',
      hint: 'the keys above show where the images are; see docs/real-service.md',
    });
    return out;
  }
  const hosts = [...new Set(images.map(hostOf))];
  const baseHost = new URL(config.baseUrl).host;
  add({ name: 'mapped images', result: CheckResult.Ok, found: `${images.length} image reference(s) found` });
  add({
    name: 'image host',
    result: CheckResult.Ok,
    found: `${hosts.join(', ')}${hosts.every((h) => h === baseHost) ? ' (the base URL host)' : ` (not the base URL host ${baseHost})`}; downloaded without the key`,
  });
  try {
    const downloadDispatcher = ctx.deps.downloadDispatcher ?? guardedDownloadDispatcher(config, 2);
    try {
      const saved = await downloadImages(
        { batchId: 'doctor', rowId: 'spend-one', creationId, images, outDir },
        {
          dispatcher: downloadDispatcher,
          outputRoot: ctx.deps.outputRoot,
          maxBytes: config.maxDownloadBytes,
          maxRedirects: config.downloadMaxRedirects,
          headersTimeoutMs: config.headersTimeoutMs,
          bodyTimeoutMs: config.bodyTimeoutMs,
          requestTimeoutMs: config.requestTimeoutMs,
          defaultRetryAfterMs: config.defaultRetryAfterMs,
          now: ctx.now,
          ...(ctx.deps.signal ? { signal: ctx.deps.signal } : {}),
        },
      );
      out.saved = saved.map((s) => path.join(outDir, s.path));
      add({
        name: 'download',
        result: CheckResult.Ok,
        found: `saved ${saved.map((s) => `${path.join(outDir, s.path)} (${s.bytes} bytes)`).join(', ')}`,
      });
    } finally {
      if (!ctx.deps.downloadDispatcher) await downloadDispatcher.close();
    }
  } catch (err) {
    add({
      name: 'download',
      result: CheckResult.Fail,
      found: redactRawText(err instanceof Error ? err.message : String(err), ctx.key),
      hint: `an image host on a private or loopback address needs ${SERVICE_CONFIG_ENV.downloadAllowHosts}`,
    });
  }
  return out;
}

type Failed = { kind: 'failed'; check: Pick<DoctorCheck, 'found' | 'hint'> };

/** Submits the one creation: same key on every try; waits out short Retry-Afters; gives up at the deadline. */
async function submitOne(
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
  for (let tries = 1; ; tries += 1) {
    const outcome = await ctx.client.submit({
      idempotencyKey,
      request: { prompt: SPEND_ONE_PROMPT, model: ctx.options.model },
    });
    switch (outcome.kind) {
      case 'accepted':
        return {
          kind: 'accepted',
          creationId: outcome.creationId,
          ...(outcome.replayed === undefined ? {} : { replayed: outcome.replayed }),
        };
      case 'rateLimited':
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
      case 'ambiguous':
      case 'notSent':
      case 'malformed':
        if (tries >= config.maxAmbiguousTries || ctx.now() >= deadline) return unknown(outcome.lastError);
        await ctx.sleep(Math.min(config.backoffMaxMs, config.backoffBaseMs * 2 ** (tries - 1)));
        continue;
      case 'refunded':
        return {
          kind: 'failed',
          check: {
            found: `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message} (charged and refunded)`,
            hint: 'the service is having trouble; run it again later with another --test-id',
          },
        };
      case 'rejected':
        return {
          kind: 'failed',
          check: {
            found:
              `HTTP ${outcome.details.httpStatus} ${outcome.details.code}: ${outcome.details.message}` +
              (outcome.details.fieldErrors.length > 0
                ? ` (${outcome.details.fieldErrors.map((f) => `${f.field}: ${f.message}`).join('; ')})`
                : '') +
              '; nothing charged',
            hint: `check ${SERVICE_CONFIG_ENV.submitPath} and how requests are mapped`,
          },
        };
      case 'batchStop':
        return {
          kind: 'failed',
          check: {
            found: `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}: ${outcome.details.message}; nothing charged`,
            hint:
              outcome.details.httpStatus === 402
                ? `top up the wallet${outcome.details.topUpUrl ? ` (${outcome.details.topUpUrl})` : ''} or raise the key's budget`
                : 'check the key and the account',
          },
        };
      case 'config':
        return { kind: 'failed', check: { found: outcome.message } };
      case 'ended':
      case 'inFlight':
      case 'models':
      case 'notFound':
        return unknown(`unexpected ${outcome.kind} answer to a submission`);
    }
  }
}

/**
 * Polls one creation through the client (so that every mapping setting applies) at the poll interval until it ends;
 * then reads its record once more, raw, for its shape (key paths only), the poll interval after the last poll.
 */
async function pollUntilEnded(
  ctx: SpendContext,
  creationId: string,
  deadline: number,
): Promise<
  | { kind: 'ended'; result: PollCreationResult; shape: string[]; record: unknown; polls: number; intervalMs: number }
  | Failed
> {
  const config = ctx.deps.config;
  let wait = ctx.client.pollIntervalMs();
  let last = 'no poll yet';
  let unclear = 0;
  for (let polls = 1; ; polls += 1) {
    if (ctx.now() + wait > deadline) {
      return {
        kind: 'failed',
        check: {
          found: `creation ${creationId} had not ended within --max-wait (${Math.round(ctx.options.maxWaitMs / 1000)} s; last: ${last}); it was paid for`,
          hint: 'run doctor --spend-one again with the same model and --test-id to follow it (nothing is paid again)',
        },
      };
    }
    await ctx.sleep(wait);
    const outcome = await ctx.client.getCreation(creationId, ctx.deps.signal);
    wait = ctx.client.pollIntervalMs();
    switch (outcome.kind) {
      case 'ended': {
        await ctx.sleep(ctx.client.pollIntervalMs());
        const raw = await rawRecord(ctx, creationId);
        return { kind: 'ended', result: outcome.result, ...raw, polls, intervalMs: ctx.client.pollIntervalMs() };
      }
      case 'inFlight':
        last = `status "${outcome.status}"`;
        continue;
      case 'rateLimited':
        last = outcome.local ? 'held back locally' : `HTTP ${outcome.httpStatus} ${outcome.code}`;
        wait = Math.max(wait, Math.min(outcome.retryAfterMs, MAX_WAIT_IN_PLACE_MS));
        continue;
      case 'notFound':
        return {
          kind: 'failed',
          check: {
            found: `the service says creation ${creationId} does not exist (404 ${outcome.code}); it was accepted, so it was paid for`,
            hint: 'ask the service about the creation id; --test-id <another name> pays for a new test',
          },
        };
      case 'ambiguous':
      case 'notSent':
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
      case 'malformed':
        return { kind: 'failed', check: { found: `a poll of creation ${creationId}: ${outcome.lastError}` } };
      case 'batchStop':
        return {
          kind: 'failed',
          check: { found: `HTTP ${outcome.details.httpStatus} ${outcome.details.reason}: ${outcome.details.message}` },
        };
      case 'config':
        return { kind: 'failed', check: { found: outcome.message } };
      case 'accepted':
      case 'models':
      case 'refunded':
      case 'rejected':
        return { kind: 'failed', check: { found: `unexpected ${outcome.kind} answer to a poll` } };
    }
  }
}

/** The record of a creation as the service sends it: its key paths (never a value) and the parsed record. */
async function rawRecord(ctx: SpendContext, creationId: string): Promise<{ shape: string[]; record: unknown }> {
  const config = ctx.deps.config;
  const auth: Record<string, string> =
    config.authHeader === AuthHeaderStyle.XApiKey ? { 'x-api-key': ctx.key } : { authorization: `Bearer ${ctx.key}` };
  const res = await send({
    dispatcher: ctx.dispatcher,
    url: `${config.baseUrl}${config.creationPath.replace('{id}', encodeURIComponent(creationId))}`,
    method: 'GET',
    headers: { accept: 'application/json', 'user-agent': 'imagebatch', ...auth },
    ...(ctx.deps.signal ? { signal: ctx.deps.signal } : {}),
    headersTimeoutMs: config.headersTimeoutMs,
    bodyTimeoutMs: config.bodyTimeoutMs,
    maxBytes: config.maxResponseBytes,
  });
  const json = res.status === 200 && res.body !== undefined ? parseJson(redactRawText(res.body, ctx.key)) : undefined;
  if (json === undefined) return { shape: [], record: undefined };
  // The record itself, or the wrapper that holds it.
  const record =
    [json, ...['data', 'creation'].map((w) => asObject(json)[w])].find(
      (r) => readUsd(r, config.costFields) !== undefined,
    ) ?? json;
  return { shape: redactJsonValue(keyPaths(json), ctx.key), record };
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/**
 * The key paths of a JSON value, never a value: `id`, `images[].url`, `billing.amount`. Array elements are merged
 * (the first few), depth and count are bounded.
 */
export function keyPaths(value: unknown, prefix = '', depth = 0, out: string[] = []): string[] {
  if (out.length >= SHAPE_PATHS || depth > 4) return out;
  if (Array.isArray(value)) {
    const before = out.length;
    for (const item of value.slice(0, 4)) keyPaths(item, `${prefix}[]`, depth + 1, out);
    if (out.length === before && prefix !== '' && !out.includes(`${prefix}[]`)) out.push(`${prefix}[]`);
    return out;
  }
  if (value === null || typeof value !== 'object') {
    if (prefix !== '' && !out.includes(prefix)) out.push(prefix);
    return out;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (out.length >= SHAPE_PATHS) break;
    const name = k.length > 40 ? `${k.slice(0, 37)}...` : k;
    keyPaths(v, prefix === '' ? name : `${prefix}.${name}`, depth + 1, out);
  }
  return out;
}

function hostOf(image: ImageRef): string {
  if (image.url.startsWith('data:')) return 'inline (data: URL)';
  return URL.canParse(image.url) ? new URL(image.url).host : 'not a URL';
}

async function readRecords(file: string): Promise<Record<string, RecordEntry>> {
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as unknown;
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, RecordEntry>)
      : {};
  } catch {
    return {};
  }
}

/** Written whole to a temporary file and renamed, so that a crash leaves the old record or the new one. */
async function writeRecords(file: string, records: Record<string, RecordEntry>): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(records, null, 2)}\n`);
  await rename(temp, file);
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The activity: the checks with the worker's settings and key, heartbeating while they run. */
export function createDoctorActivities(deps: Omit<DoctorDeps, 'signal' | 'sleep' | 'ranOn'>) {
  return {
    async doctorChecks(options: DoctorOptions): Promise<DoctorReport> {
      const ctx = Context.current();
      return whileHeartbeating(
        ctx,
        runDoctorChecks(
          { ...deps, signal: ctx.cancellationSignal, ranOn: `worker ${process.pid}@${os.hostname()}` },
          options,
        ),
      );
    },
  };
}
