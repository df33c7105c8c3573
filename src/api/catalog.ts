import { z } from 'zod';
import type { ModelInfo } from '../model';
import { readUsd } from './money';
import { DOTTED_NAMES, valuesAt } from './record-path';

/**
 * The model catalog: where its list is, each model's id (read at `IMAGEGEN_MODEL_ID_FIELDS`, strictly: runs never
 * guess) and price. For `doctor` only, {@link guessModelIdField} looks for the ids under another name. Pure.
 */

/** Where a model record of the catalog carries its id: `IMAGEGEN_MODEL_ID_FIELDS`. */
export const DEFAULT_MODEL_ID_FIELDS: readonly string[] = ['id'];

/** The list of a catalog body: an array at the root or under `data`, `models` or `items`; undefined when none. */
export function catalogEntries(body: unknown): unknown[] | undefined {
  if (Array.isArray(body)) return body as unknown[];
  if (body === null || typeof body !== 'object') return undefined;
  const obj = body as Record<string, unknown>;
  return [obj.data, obj.models, obj.items].find((x): x is unknown[] => Array.isArray(x));
}

/**
 * The model catalog (see {@link catalogEntries}). A model's id is read at `idFields` (a string or a number); entries
 * without one are left out. Undefined when the body has no list. A model's price is read at `priceFields` (see
 * `readUsd`); a model that shows none has no `priceUsd` (unknown, not free).
 */
export function parseModels(
  body: unknown,
  priceFields: readonly string[],
  idFields: readonly string[] = DEFAULT_MODEL_ID_FIELDS,
): ModelInfo[] | undefined {
  const list = catalogEntries(body);
  if (list === undefined) return undefined;
  const out: ModelInfo[] = [];
  for (const item of list) {
    const id = modelIdAt(item, idFields);
    if (id === undefined) continue;
    const parsed = ModelName.safeParse(item);
    const name = parsed.success ? parsed.data.name : undefined;
    const priceUsd = readUsd(item, priceFields);
    out.push({ id, ...(name === undefined ? {} : { name }), ...(priceUsd === undefined ? {} : { priceUsd }) });
  }
  return out;
}

const ModelId = z.union([z.string().min(1), z.number().transform(String)]);
const ModelName = z.looseObject({ name: z.string().optional().catch(undefined) });

function modelIdAt(item: unknown, paths: readonly string[]): string | undefined {
  for (const p of paths) {
    for (const { value } of valuesAt(item, p)) {
      const parsed = ModelId.safeParse(value);
      if (parsed.success) return parsed.data;
    }
  }
  return undefined;
}

/**
 * Names under which catalogs commonly carry a model's id, tried in order when the configured paths find none.
 * `name` is last: it is often a display name ("Flux Dev").
 */
export const COMMON_MODEL_ID_NAMES = [
  'id',
  'model_id',
  'modelId',
  'slug',
  'model',
  'key',
  'identifier',
  'model_name',
  'modelName',
  'code',
  'name',
] as const;

/** How deep {@link guessModelIdField} looks into a model record for the value of `--model` (the record is 1). */
export const MODEL_ID_SEARCH_DEPTH = 3;

/** Where {@link guessModelIdField} found the ids. */
export const ModelIdGuessBy = {
  /** A field of {@link COMMON_MODEL_ID_NAMES} holds an id in most entries. */
  Name: 'name',
  /** A field holds the model asked for (`--model`). */
  Value: 'value',
} as const;
export type ModelIdGuessBy = (typeof ModelIdGuessBy)[keyof typeof ModelIdGuessBy];

export interface ModelIdGuess {
  /** The path to write into `IMAGEGEN_MODEL_ID_FIELDS`: `slug`, `meta.slug`. */
  field: string;
  by: ModelIdGuessBy;
  /** The ids found there, in catalog order. */
  ids: string[];
}

/**
 * Where a catalog's model ids are when `configured` finds none (or, with `model`, not that one): the field of the
 * entries that holds `model`, when `model` is given and some field does; else the first of
 * {@link COMMON_MODEL_ID_NAMES} that gives an id (with no white space) in at least half of the entries, when the
 * configured paths give none. Undefined when the body has no list, or nothing better is found. For `doctor`: runs read the configured
 * paths only.
 */
export function guessModelIdField(
  body: unknown,
  configured: readonly string[],
  model?: string,
): ModelIdGuess | undefined {
  const list = catalogEntries(body);
  if (list === undefined || list.length === 0) return undefined;
  const idsAt = (field: string) => list.flatMap((item) => modelIdAt(item, [field]) ?? []);
  const found = list.flatMap((item) => modelIdAt(item, configured) ?? []);
  if (model !== undefined && model !== '' && !found.includes(model)) {
    for (const item of list) {
      const field = pathOfValue(item, model, '', 1);
      if (field !== undefined && !configured.includes(field)) {
        return { field, by: ModelIdGuessBy.Value, ids: idsAt(field) };
      }
    }
  }
  if (found.length > 0) return undefined;
  for (const name of COMMON_MODEL_ID_NAMES) {
    if (configured.includes(name)) continue;
    const ids = idsAt(name);
    // An id has no white space: a field of display names ("Flux Dev") is no id.
    if (ids.some((id) => /\s/.test(id))) continue;
    if (ids.length > 0 && ids.length * 2 >= list.length) return { field: name, by: ModelIdGuessBy.Name, ids };
  }
  return undefined;
}

/** The dotted path of the first field of `value` (objects only, not arrays) equal to `wanted`, if any. */
function pathOfValue(value: unknown, wanted: string, prefix: string, depth: number): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || depth > MODEL_ID_SEARCH_DEPTH) {
    return undefined;
  }
  for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
    const at = prefix === '' ? name : `${prefix}.${name}`;
    if (!DOTTED_NAMES.test(at)) continue;
    if (v === wanted || (typeof v === 'number' && String(v) === wanted)) return at;
    const inner = pathOfValue(v, wanted, at, depth + 1);
    if (inner !== undefined) return inner;
  }
  return undefined;
}
