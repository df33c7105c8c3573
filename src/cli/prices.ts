import { readFile } from 'node:fs/promises';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import type { ModelInfo, PriceSource } from '../model';
import type { BatchReport } from '../batch';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { modelCatalogWorkflow } from '../workflows';
import type { OptionSpec } from './command';
import { OptionError } from './errors';
import { USD_PATTERN, repeated } from './options';

/**
 * Prices for the CLI: the ones the user gives (`--price <model>=<usd>`, `--prices <file>`), the catalog's (asked
 * through a worker, which holds the API key), and which one a model's rows are charged at when the creation does not
 * say: the catalog's first, then the user's. Nothing known is unknown, never 0.
 */

/** `--price` or `--prices` cannot be used: names the option and what is wrong. Exit 2 (usage). */
export class PriceOptionError extends OptionError {
  override readonly code: ErrorCode = ErrorCode.PriceOptionInvalid;
}

/**
 * A spend cap was asked for and some model's price is not known: the cap could not be kept, so nothing started.
 * Exit 3.
 */
export class PriceUnknownError extends ImagebatchError {
  readonly code = ErrorCode.PriceUnknown;
  constructor(
    readonly models: readonly string[],
    readonly catalogProblem: string | undefined,
  ) {
    super(
      `--spend-cap needs a price for every model, and none is known for ${models.join(', ')}` +
        `${catalogProblem ? ` (the catalog could not be read: ${catalogProblem})` : ' (the catalog shows none)'}; ` +
        `give one with --price ${models[0]}=<usd per image> or --prices <file>, or set IMAGEGEN_PRICE_FIELDS if the ` +
        'catalog shows it under another name; nothing was started',
    );
  }
}

/** One `--price` value, `<model>=<usd per image>`. */
export function parsePriceOption(value: string, previous: Record<string, number> = {}): Record<string, number> {
  const at = value.lastIndexOf('=');
  const model = value.slice(0, at).trim();
  const usd = value.slice(at + 1).trim();
  if (at < 1 || model === '') throw new PriceOptionError('--price', `expected <model>=<usd per image>, got "${value}"`);
  if (!USD_PATTERN.test(usd)) {
    throw new PriceOptionError('--price', `the price of ${model} must be a decimal number of USD, got "${usd}"`);
  }
  return { ...previous, [model]: Number(usd) };
}

/**
 * A price file: a JSON object `{ "<model>": <usd per image>, ... }`, or lines `<model>,<usd>` (a header line
 * `model,price_usd` and blank lines are skipped). Every problem names the file and the line.
 */
export async function readPriceFile(file: string): Promise<Record<string, number>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new PriceOptionError(
      '--prices',
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  if (text.trimStart().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new PriceOptionError('--prices', `${file} is not valid JSON: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new PriceOptionError('--prices', `${file} must hold a JSON object of model to USD per image`);
    }
    const out: Record<string, number> = {};
    for (const [model, usd] of Object.entries(parsed as Record<string, unknown>)) {
      if (typeof usd !== 'number' || !Number.isFinite(usd) || usd < 0) {
        throw new PriceOptionError('--prices', `${file}: the price of ${model} must be a number of USD >= 0`);
      }
      out[model] = usd;
    }
    return out;
  }
  const out: Record<string, number> = {};
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || (i === 0 && /^model\s*,/i.test(line))) return;
    const [model, usd, ...rest] = line.split(',').map((c) => c.trim());
    if (!model || usd === undefined || rest.length > 0 || !USD_PATTERN.test(usd)) {
      throw new PriceOptionError('--prices', `${file}:${i + 1}: expected <model>,<usd per image>, got "${line}"`);
    }
    out[model] = Number(usd);
  });
  return out;
}

/** The user's prices from both options; `--price` wins over the file for a model both name. */
export async function userPrices(options: {
  price?: Record<string, number>;
  prices?: string;
}): Promise<Record<string, number>> {
  return { ...(options.prices ? await readPriceFile(options.prices) : {}), ...options.price };
}

/** The catalog through a running worker, or why it could not be read. */
export async function readCatalog(
  client: Client,
  taskQueue: string,
): Promise<{ models: ModelInfo[] } | { problem: string }> {
  try {
    const models = await client.workflow.execute(modelCatalogWorkflow, {
      taskQueue,
      workflowId: `catalog/${Date.now()}`,
      workflowExecutionTimeout: '1 minute',
    });
    return { models };
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    return { problem: `${why} (is a worker running on task queue ${taskQueue}?)` };
  }
}

/** A model of the file with its price per image, where it comes from, and whether the account has it. */
export interface ModelPrice {
  model: string;
  rows: number;
  images: number;
  /** False when the catalog was read and does not list the model; undefined when it was not read. */
  available?: boolean;
  /** USD per image; absent when not known. */
  priceUsd?: number;
  source?: typeof PriceSource.Catalog | typeof PriceSource.User;
}

/** Each model of the file priced as a batch prices it: the catalog's price, else the user's, else unknown. */
export function priceModels(
  models: BatchReport['models'],
  catalog: readonly ModelInfo[] | undefined,
  user: Readonly<Record<string, number>>,
): ModelPrice[] {
  const byId = new Map(catalog?.map((m) => [m.id, m]));
  return Object.entries(models).map(([model, usage]) => {
    const listed = byId.get(model);
    const price =
      listed?.priceUsd !== undefined
        ? { priceUsd: listed.priceUsd, source: 'catalog' as const }
        : user[model] !== undefined
          ? { priceUsd: user[model], source: 'user' as const }
          : {};
    return {
      model,
      rows: usage.rows,
      images: usage.images,
      ...(catalog ? { available: listed !== undefined } : {}),
      ...price,
    };
  });
}

/** What the file costs if every row succeeds at its first attempt: known part, and the models of unknown price. */
export function estimateOf(models: readonly ModelPrice[]): { knownUsd: number; unknownModels: string[] } {
  let knownUsd = 0;
  const unknownModels: string[] = [];
  for (const m of models) {
    if (m.priceUsd === undefined) unknownModels.push(m.model);
    else knownUsd += m.priceUsd * m.images;
  }
  return { knownUsd: Math.round(knownUsd * 1e6) / 1e6, unknownModels };
}

/**
 * Before a batch (or schedule) with a spend cap starts: every model of the file must have a price, from the catalog or
 * the user, or nothing starts ({@link PriceUnknownError}).
 */
export async function checkPricesForCap(
  client: Client,
  taskQueue: string,
  models: BatchReport['models'],
  user: Readonly<Record<string, number>>,
): Promise<ModelPrice[]> {
  const needsCatalog = Object.keys(models).some((m) => user[m] === undefined);
  const catalog = needsCatalog ? await readCatalog(client, taskQueue) : { models: [] };
  const priced = priceModels(models, 'models' in catalog ? catalog.models : undefined, user);
  const unknown = priced.filter((m) => m.priceUsd === undefined).map((m) => m.model);
  if (unknown.length > 0) throw new PriceUnknownError(unknown, 'problem' in catalog ? catalog.problem : undefined);
  return priced;
}

/**
 * `--price <model>=<usd>` (repeatable) and `--prices <file>`: the same options on run, resume, validate and schedule
 * create; `about` says what they are for on a command that only sometimes uses them.
 */
export const priceOptions = (about = ''): OptionSpec[] => [
  {
    flags: '--price <model=usd>',
    description: `${about}price per image of a model (repeatable)`,
    repeatable: true,
  },
  { flags: '--prices <file>', description: `${about}prices per image: JSON object or model,usd lines` },
];

/** The schema of {@link priceOptions}: each `--price` checked as it is read; the file is read by {@link userPrices}. */
export const priceSchema = { price: repeated(parsePriceOption), prices: z.string().optional() };

export interface PriceCliOptions {
  price?: Record<string, number>;
  prices?: string;
}

/** The batch input's `prices`, when the user gave any. */
export async function pricesInput(opts: PriceCliOptions): Promise<{ prices?: Record<string, number> }> {
  const prices = await userPrices(opts);
  return Object.keys(prices).length > 0 ? { prices } : {};
}
