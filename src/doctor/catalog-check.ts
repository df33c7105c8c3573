import { guessModelIdField, ModelIdGuessBy, parseModels, catalogEntries } from '../api/catalog';
import type { ClientOutcome } from '../api/client';
import type { ModelInfo } from '../model';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import { CheckResult, type DoctorCheck, type SettingToWrite } from './types';

/**
 * The catalog checks of `doctor` (authentication as the catalog request showed it, the models, their prices). When
 * the configured `IMAGEGEN_MODEL_ID_FIELDS` find no model id (or, with `--spend-one --model`, not that one), the
 * catalog is read again raw and the ids are looked for under common names, or in the field holding the model asked
 * for: a warning naming the setting to write, not a failure. A catalog that cannot be read or understood fails with
 * {@link DoctorCheck.catalogShape}, which does not stop `--spend-one`.
 */

/** Models listed in one line of the report. */
const MODELS_SHOWN = 12;
/** Field names of a catalog entry shown at most. */
const ENTRY_FIELDS_SHOWN = 8;
/** What every catalog failure adds: the paid test still runs. */
const SPEND_ONE_STILL_RUNS = 'doctor --spend-one --model <id> still runs the paid test';

export interface CatalogContext {
  config: ServiceConfig;
  /** `Authorization: Bearer` or `X-API-Key`. */
  header: string;
  add: (check: DoctorCheck) => void;
  addSetting: (setting: SettingToWrite) => void;
  /** The catalog's body, read again raw. */
  rawCatalog: () => Promise<unknown>;
  /** `--spend-one --model`, when given. */
  model?: string;
}

/** The models (those guessed, when the ids were found elsewhere), or undefined when the catalog is not known. */
export async function checkCatalog(ctx: CatalogContext, outcome: ClientOutcome): Promise<ModelInfo[] | undefined> {
  const { config, add } = ctx;
  const path = config.modelsPath;
  if (outcome.kind !== 'models') {
    const why =
      outcome.kind === 'rateLimited'
        ? `HTTP ${outcome.httpStatus} ${outcome.code}: ${outcome.message} (retry after ${outcome.retryAfterMs} ms)`
        : outcome.kind === 'ambiguous' || outcome.kind === 'notSent' || outcome.kind === 'malformed'
          ? outcome.lastError
          : `unexpected ${outcome.kind} answer`;
    add(notRefused(path));
    add({
      name: 'models',
      result: CheckResult.Fail,
      found: `GET ${path} did not give a catalog: ${why}`,
      hint: `a batch reads the catalog at its start; run doctor again later, or check ${SERVICE_CONFIG_ENV.modelsPath}; ${SPEND_ONE_STILL_RUNS}`,
      catalogShape: true,
    });
    add({ name: 'prices', result: CheckResult.Skipped, found: 'the catalog could not be read' });
    return undefined;
  }
  add({
    name: 'authentication',
    result: CheckResult.Ok,
    found: `the key was accepted with ${ctx.header} (GET ${path} answered 200)`,
  });
  let models = outcome.models;
  if (models.length === 0 || (ctx.model !== undefined && !models.some((m) => m.id === ctx.model))) {
    const body = await ctx.rawCatalog();
    const guess = guessModelIdField(body, config.modelIdFields, ctx.model);
    const configured = config.modelIdFields.join(', ');
    const variable = SERVICE_CONFIG_ENV.modelIdFields;
    if (guess) {
      models = parseModels(body, config.priceFields, [guess.field]) ?? [];
      const where =
        guess.by === ModelIdGuessBy.Value
          ? `the model asked for, ${ctx.model}, is under ${guess.field}`
          : `the entries carry ids under ${guess.field}`;
      add({
        name: 'models',
        result: CheckResult.Warn,
        found: `no model id at ${configured} (${variable}); ${where}: ${listed(models)}`,
        hint: `a batch reads ids at ${variable} only: write the setting below`,
      });
      ctx.addSetting({ variable, value: guess.field, why: 'where the catalog carries model ids' });
    } else if (models.length === 0) {
      const entries = catalogEntries(body) ?? [];
      const first = entries.find((e): e is object => e !== null && typeof e === 'object' && !Array.isArray(e));
      const names = first === undefined ? [] : Object.keys(first).slice(0, ENTRY_FIELDS_SHOWN);
      add({
        name: 'models',
        result: CheckResult.Fail,
        found:
          entries.length === 0
            ? 'the catalog lists no model the account can use'
            : `no model id at ${configured} (${variable}) in the catalog's ${entries.length} entries; no other field holds one` +
              `${ctx.model === undefined ? '' : ` or ${ctx.model}`}${names.length > 0 ? ` (their fields: ${names.join(', ')})` : ''}`,
        hint:
          entries.length === 0
            ? `a batch has no model to run; check the account in the portal; ${SPEND_ONE_STILL_RUNS}`
            : `set ${variable} to the field that holds a model's id; ${SPEND_ONE_STILL_RUNS}`,
        catalogShape: true,
      });
      return undefined;
    } else {
      add({
        name: 'models',
        result: CheckResult.Ok,
        found: `${models.length} model(s) with price per image: ${listed(models)}`,
      });
    }
  } else {
    add({
      name: 'models',
      result: CheckResult.Ok,
      found: `${models.length} model(s) with price per image: ${listed(models)}`,
    });
  }
  add(pricesCheck(config, models));
  return models;
}

/** A catalog request that was not refused: the key may be right, nothing proves it. */
export function notRefused(path: string): DoctorCheck {
  return {
    name: 'authentication',
    result: CheckResult.Guess,
    found: `not refused (no 401 or 403 to GET ${path}), but not proven either`,
  };
}

function listed(models: ModelInfo[]): string {
  const shown = models
    .slice(0, MODELS_SHOWN)
    .map((m) => `${m.id} ${m.priceUsd === undefined ? 'unknown' : `$${m.priceUsd}`}`);
  return `${shown.join(', ')}${models.length > MODELS_SHOWN ? `, and ${models.length - MODELS_SHOWN} more` : ''}`;
}

function pricesCheck(config: ServiceConfig, models: ModelInfo[]): DoctorCheck {
  const unpriced = models.filter((m) => m.priceUsd === undefined);
  if (unpriced.length === 0) {
    return {
      name: 'prices',
      result: CheckResult.Ok,
      found: `every model has a price in the catalog (read at ${SERVICE_CONFIG_ENV.priceFields})`,
    };
  }
  return {
    name: 'prices',
    result: CheckResult.Guess,
    found:
      `unknown for ${unpriced.length === models.length ? 'every model' : unpriced.map((m) => m.id).join(', ')}: ` +
      `no price at ${config.priceFields.slice(0, 4).join(', ')}${config.priceFields.length > 4 ? ', ...' : ''}`,
    hint:
      `batches still run, but spend shows as unknown and --spend-cap needs --price <model>=<usd>; if the ` +
      `catalog shows a price under another name, set ${SERVICE_CONFIG_ENV.priceFields}`,
  };
}
