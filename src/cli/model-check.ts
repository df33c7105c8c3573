import type { BatchReport } from '../batch';
import type { ModelInfo, ServiceCheck } from '../model';
import { ErrorCode, ImagebatchError } from '../model/errors';

/**
 * The batch's models against the account's catalog (a free GET of the models), before anything is started or
 * charged: a model the account lacks would only be refused row by row (404 ERR_MODEL_NOT_FOUND), each row a request.
 */

/** How many of the account's models a message names; the others are counted. */
export const LISTED_MODELS = 12;

/**
 * A catalog whose list gave no id: the service names its models under another field (more likely than an account
 * without models), so nothing is refused for it.
 */
export const NO_MODEL_IDS =
  'it lists no model id where the settings read them (IMAGEGEN_MODEL_ID_FIELDS; imagebatch doctor finds them)';

/** A model of the batch file that the account's catalog does not list, and how many rows use it. */
export interface MissingModel {
  model: string;
  rows: number;
}

const rowsText = (n: number) => `${n} row${n === 1 ? '' : 's'}`;

/** The account's models for a message: the first {@link LISTED_MODELS}, then how many more. */
export function accountModelsText(catalog: readonly ModelInfo[], listed = LISTED_MODELS): string {
  const ids = catalog.map((m) => m.id);
  if (ids.length === 0) return 'none';
  return ids.length <= listed ? ids.join(', ') : `${ids.slice(0, listed).join(', ')} and ${ids.length - listed} more`;
}

/** The file's models that the catalog does not list, in the file's order. */
export function missingModels(models: BatchReport['models'], catalog: readonly ModelInfo[]): MissingModel[] {
  const listed = new Set(catalog.map((m) => m.id));
  return Object.entries(models)
    .filter(([model]) => !listed.has(model))
    .map(([model, usage]) => ({ model, rows: usage.rows }));
}

/** The part of a message naming the missing models: `model flux-pro (12 rows) is` / `models a (1 row), b (2 rows) are`. */
export function missingText(missing: readonly MissingModel[]): string {
  const each = missing.map((m) => `${m.model} (${rowsText(m.rows)})`).join(', ');
  return missing.length === 1 ? `model ${each} is` : `models ${each} are`;
}

/** The batch names models the account lacks: nothing was started or charged. Exit 3 (invalid input). */
export class ModelUnavailableError extends ImagebatchError {
  readonly code = ErrorCode.ModelUnavailable;
  constructor(
    readonly missing: readonly MissingModel[],
    catalog: readonly ModelInfo[],
  ) {
    super(
      `${missingText(missing)} not available to this account (its models: ${accountModelsText(catalog)}); ` +
        'fix the model column or --model; nothing was started',
    );
  }
}

/**
 * Before a batch starts: throws {@link ModelUnavailableError} when the catalog was read and lacks a model of the
 * file; returns the line to say when it could not be read (`why`) or listed no id the settings read, which blocks
 * nothing (a service may have no catalog, or name its ids elsewhere); nothing when every model is listed.
 */
export function checkBatchModels(
  models: BatchReport['models'],
  catalog: readonly ModelInfo[] | undefined,
  why: string,
): string | undefined {
  if (!catalog) return `models not checked against the account's catalog: ${why}`;
  if (catalog.length === 0) return `models not checked against the account's catalog: ${NO_MODEL_IDS}`;
  const missing = missingModels(models, catalog);
  if (missing.length > 0) throw new ModelUnavailableError(missing, catalog);
  return undefined;
}

/** {@link checkBatchModels} with the catalog the worker's service check read (`run`), or why there is none. */
export function checkModelsOf(
  models: BatchReport['models'],
  check: ServiceCheck | { noAnswer: string },
): string | undefined {
  if ('noAnswer' in check) return checkBatchModels(models, undefined, `no worker answered (${check.noAnswer})`);
  const catalog = 'models' in check ? check.models : undefined;
  return checkBatchModels(models, catalog, 'the service showed none the worker could read');
}
