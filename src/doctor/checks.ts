import { randomBytes } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { ApiKeyError, assertApiKeyFormat, keyFingerprint } from '../api/api-key';
import { ImageApiClient, type ClientOutcome } from '../api/client';
import { API_PREFIX, ErrorCode } from '../api/contract';
import { BatchStopReason, type ModelInfo } from '../model';
import { createServiceDispatcher } from '../api/http';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { AuthHeaderStyle, type ServiceConfig } from '../api/service-config';
import { describeKeyCarrier } from '../api/key-carrier';
import { checkCatalog, notRefused } from './catalog-check';
import { rawGet, type RawRead } from './raw-read';
import { spendOne } from './spend-one';
import { MAX_WAIT_IN_PLACE_MS } from './spend-requests';
import {
  CheckResult,
  type DoctorCheck,
  type DoctorDeps,
  type DoctorOptions,
  type DoctorReport,
  type SettingToWrite,
} from './types';

export * from './types';
export { SPEND_ONE_RECORD, spendOneKey } from './spend-one';
export { SPEND_ONE_PROMPT } from './spend-requests';
export { keyPaths } from './record-file';
export { settingLine } from './settings-to-write';

/**
 * `imagebatch doctor`: checks a service with the settings and the key of whoever runs it (a worker, through
 * `doctorWorkflow`, or the CLI itself with `--local`), without spending: the key's format, the base URL, the
 * authentication, the catalog and its prices, the creation path (a made-up id must get the documented 404
 * ERR_NOT_FOUND), the image host. With `spendOne`, ONE creation is submitted under an idempotency key the user can see
 * and a re-run reuses, followed, its record's shape (keys only) and its mapping shown, and its images saved
 * (`doctor/spend-one.ts`). Settings the checks find the service needs (model ids under another name, a success word,
 * where the images are) are collected in the report's `settings`, ready to write.
 *
 * Every finding is data of the report, never a thrown error, and nothing in it holds the key: a fingerprint at most.
 */

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
  const addSetting = (setting: SettingToWrite) => {
    const settings = (report.settings ??= []);
    const at = settings.findIndex((s) => s.variable === setting.variable);
    if (at >= 0) settings[at] = setting;
    else settings.push(setting);
  };
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
      `base URL ${config.baseUrl}; key sent as ${header}; idempotency key in ${describeKeyCarrier(config)}; paths: ` +
      `submit ${config.submitPath}, creation ${config.creationPath}, models ${config.modelsPath}; polls at least ` +
      `${config.minPollIntervalMs} ms apart`,
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
  const signal = deps.signal ? { signal: deps.signal } : {};
  const raw = (path: string) => rawGet({ config, dispatcher, key, now, ...signal }, path);
  try {
    const model = options.spendOne?.model;
    const ctx = { config, client, dispatcher, key, header, now, sleep, add, addSetting, skipRest, raw };
    const service = await checkService({ ...ctx, ...(model ? { model } : {}) });
    if (service === undefined) return report;
    const { models } = service;
    if (models !== undefined) report.models = models;
    // A catalog that could not be read or understood does not stop the paid test asked for: its record shows the rest.
    const blocking = report.checks.filter(
      (c) => c.result === CheckResult.Fail && !(options.spendOne && (c.spendOneSettles || c.catalogShape)),
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
    report.spendOne = await spendOne({ ...ctx, deps, options: options.spendOne, models, settle });
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
  addSetting: (setting: SettingToWrite) => void;
  skipRest: (names: string[], why: string) => void;
  raw: (path: string) => Promise<RawRead>;
  /** `--spend-one --model`. */
  model?: string;
}

/** A free request, again once after a short Retry-After. */
async function freeRequest(ctx: CheckContext, request: () => Promise<ClientOutcome>): Promise<ClientOutcome> {
  const first = await request();
  if (first.kind !== 'rateLimited' || first.retryAfterMs > MAX_WAIT_IN_PLACE_MS) return first;
  await ctx.sleep(first.retryAfterMs);
  return request();
}

/**
 * Base URL, authentication, catalog, prices and creation path. Undefined when nothing else could work (no base URL,
 * no authentication); else the models, undefined when the catalog could not be read or understood.
 */
async function checkService(ctx: CheckContext): Promise<{ models: ModelInfo[] | undefined } | undefined> {
  const { config, add } = ctx;
  const baseUrl = new URL(config.baseUrl);
  const modelsUrl = `${config.baseUrl}${config.modelsPath}`;
  const expectedPrefix = baseUrl.pathname.replace(/\/+$/, '').endsWith(API_PREFIX);
  const started = ctx.now();
  const outcome = await freeRequest(ctx, () => ctx.client.listModels());
  const ms = ctx.now() - started;
  const pathGuess = expectedPrefix ? '' : ` (the interface's {base_url} ends in ${API_PREFIX}; this one does not)`;
  const rest = [
    'authentication',
    'models',
    'prices',
    'creation path',
    'image host',
    ...(ctx.model ? ['spend one'] : []),
  ];

  if (outcome.kind === 'config') {
    add({ name: 'base URL', result: CheckResult.Fail, found: outcome.message });
    ctx.skipRest(rest, 'the request was not sent');
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
    ctx.skipRest(rest, 'the service was not reached');
    return undefined;
  }
  if (outcome.kind === 'malformed' && httpStatus === 404) {
    // No catalog there: a wrong base URL, or only a wrong catalog path when creations answer as documented.
    const creationPath = await checkCreationPath(ctx);
    if (creationPath.result !== CheckResult.Ok) {
      add({
        name: 'base URL',
        result: CheckResult.Fail,
        found: `reachable, but GET ${modelsUrl} answered HTTP 404 (${outcome.lastError}): no catalog at this address${pathGuess}`,
        hint: `check the path of ${SERVICE_CONFIG_ENV.baseUrl} (and ${SERVICE_CONFIG_ENV.modelsPath} if it is set)`,
      });
      ctx.skipRest(rest, 'the base URL is wrong');
      return undefined;
    }
    add({
      name: 'base URL',
      result: expectedPrefix ? CheckResult.Ok : CheckResult.Warn,
      found: `reachable: creations answer as documented at ${config.creationPath}${pathGuess}`,
    });
    add(notRefused(config.modelsPath));
    add({
      name: 'models',
      result: CheckResult.Fail,
      found: `GET ${config.modelsPath} answered HTTP 404 (${outcome.lastError}): no catalog at this path`,
      hint: `set ${SERVICE_CONFIG_ENV.modelsPath} to the service's catalog; doctor --spend-one --model <id> still runs the paid test`,
      catalogShape: true,
    });
    add({ name: 'prices', result: CheckResult.Skipped, found: 'the catalog could not be read' });
    add(creationPath);
    return { models: undefined };
  }
  add({
    name: 'base URL',
    result: expectedPrefix ? CheckResult.Ok : CheckResult.Warn,
    found: `reachable: GET ${modelsUrl} answered HTTP ${statusOf(outcome) ?? 200} in ${ms} ms${pathGuess}`,
  });

  if (outcome.kind === 'batchStop') {
    add(authFailure(outcome.details.reason, outcome.details.httpStatus, outcome.details.message, ctx));
    ctx.skipRest(rest.slice(1), 'the key was not accepted');
    return undefined;
  }
  const rawCatalog = async () => (await ctx.raw(config.modelsPath)).json;
  const catalog = { config, header: ctx.header, add, addSetting: ctx.addSetting, rawCatalog };
  const models = await checkCatalog({ ...catalog, ...(ctx.model ? { model: ctx.model } : {}) }, outcome);
  add(await checkCreationPath(ctx));
  return { models };
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
async function checkCreationPath(ctx: CheckContext): Promise<DoctorCheck> {
  const { config } = ctx;
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
    return same
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
        };
  }
  if (outcome.kind === 'ambiguous' && outcome.unrecognizedNotFound) {
    return {
      name: 'creation path',
      result: CheckResult.Fail,
      found: `${where} answered 404 without the ${ErrorCode.NotFound} envelope (${outcome.lastError}): ${config.creationPath} is probably wrong`,
      hint: `set ${variable} to the service's path of a creation (with {id}); a batch stops after 5 such polls`,
    };
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
  return {
    name: 'creation path',
    result: CheckResult.Fail,
    found: `${where} should answer 404 ${ErrorCode.NotFound}, got ${got}`,
    hint: `check ${variable}`,
  };
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
