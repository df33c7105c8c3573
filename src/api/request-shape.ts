import type { CreationRequest } from '../model';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { DOTTED_NAMES } from './record-path';

/**
 * The shape of the submit body: where each request field goes (`IMAGEGEN_REQUEST_FIELDS`), the fixed fields added
 * to every body (`IMAGEGEN_REQUEST_TEMPLATE`), and where a row's own columns go (`--column <column>=<field>`, the
 * request's `extra`). The body must be byte-for-byte the same for the same request and settings, because the service
 * answers the same idempotency key with a different body with a 400: every step below has a fixed order.
 */

/** The request fields a batch row fills, in the order they are placed in the body. */
export const REQUEST_SOURCES = ['prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;
export type RequestSource = (typeof REQUEST_SOURCES)[number];

/** Where each request field goes in the body: a field name, or a dotted path that makes nested objects. */
export type RequestFields = Readonly<Record<RequestSource, string>>;

/** A body field name, or a dotted path (`input.text`): the names of record paths, without brackets. */
export const BODY_PATH = DOTTED_NAMES;

/** Largest `IMAGEGEN_REQUEST_TEMPLATE`, in UTF-8 bytes. */
export const MAX_TEMPLATE_BYTES = 8 * 1024;

/** Names that would reach an object's prototype if used as keys. */
const FORBIDDEN_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor']);

/** The body as documented (contract-defaults.md): every field under its own name. */
export const IDENTITY_FIELDS: RequestFields = Object.freeze(
  Object.fromEntries(REQUEST_SOURCES.map((s) => [s, s])) as Record<RequestSource, string>,
);

const isSource = (s: string): s is RequestSource => (REQUEST_SOURCES as readonly string[]).includes(s);

/** Why a body path cannot be used, or undefined. */
export function bodyPathProblem(path: string): string | undefined {
  if (!BODY_PATH.test(path)) return `"${path}" is not a field name or a dotted path such as input.text`;
  const bad = path.split('.').find((seg) => FORBIDDEN_SEGMENTS.has(seg));
  return bad === undefined ? undefined : `"${path}" uses the reserved name "${bad}"`;
}

/** Whether one path is the other, or inside it (`a` and `a.b`): both cannot be set in one body. */
function overlaps(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}

/**
 * Parses `IMAGEGEN_REQUEST_FIELDS`: comma-separated `<field>=<target>` renames. Unlisted fields keep their names.
 * Returns the full mapping, or the problem.
 */
export function parseRequestFields(raw: string): RequestFields | string {
  const out: Record<RequestSource, string> = { ...IDENTITY_FIELDS };
  const given = new Set<string>();
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const at = entry.indexOf('=');
    if (at < 0) return `"${entry}" must be <field>=<target>, such as prompt=input.text`;
    const source = entry.slice(0, at).trim();
    const target = entry.slice(at + 1).trim();
    if (!isSource(source)) return `"${source}" is not a request field (one of ${REQUEST_SOURCES.join(', ')})`;
    if (given.has(source)) return `${source} is renamed twice`;
    given.add(source);
    const problem = bodyPathProblem(target);
    if (problem) return `the target of ${source}: ${problem}`;
    out[source] = target;
  }
  for (let i = 0; i < REQUEST_SOURCES.length; i++) {
    for (let j = i + 1; j < REQUEST_SOURCES.length; j++) {
      const a = REQUEST_SOURCES[i]!;
      const b = REQUEST_SOURCES[j]!;
      if (overlaps(out[a], out[b])) {
        return out[a] === out[b]
          ? `${a} and ${b} would both go to "${out[a]}" (duplicate target)`
          : `${a} goes to "${out[a]}" and ${b} to "${out[b]}": one is inside the other`;
      }
    }
  }
  return Object.freeze(out);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A reserved key anywhere in a JSON value, as a dotted path, or undefined. */
function reservedKey(value: unknown, at: string): string | undefined {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = reservedKey(v, `${at}[${i}]`);
      if (found) return found;
    }
  } else if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const here = at ? `${at}.${k}` : k;
      if (FORBIDDEN_SEGMENTS.has(k)) return here;
      const found = reservedKey(v, here);
      if (found) return found;
    }
  }
  return undefined;
}

/** Parses `IMAGEGEN_REQUEST_TEMPLATE`: a JSON object of at most 8 KiB. Returns it (frozen), or the problem. */
export function parseRequestTemplate(raw: string): Readonly<Record<string, unknown>> | string {
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > MAX_TEMPLATE_BYTES) return `is ${bytes} bytes; at most ${MAX_TEMPLATE_BYTES} are allowed`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    return `is not valid JSON (${(err as Error).message})`;
  }
  if (!isPlainObject(parsed)) return 'must be a JSON object such as {"output_format":"png"}';
  const reserved = reservedKey(parsed, '');
  if (reserved) return `uses the reserved key "${reserved}"`;
  return deepFreeze(parsed);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Why the template cannot go with the body path `target`, where `who` goes (by `setting`): the template sets the
 * path, or a value where the path needs an object. Undefined when it fits.
 */
function templatePathClash(
  template: Readonly<Record<string, unknown>>,
  target: string,
  who: string,
  setting: string,
): string | undefined {
  const segments = target.split('.');
  let node: unknown = template;
  for (let i = 0; i < segments.length; i++) {
    if (!isPlainObject(node)) break;
    const seg = segments[i]!;
    if (!Object.hasOwn(node, seg)) break;
    const at = segments.slice(0, i + 1).join('.');
    if (i === segments.length - 1) return `sets "${at}", where ${who} goes (${setting}); remove it from the template`;
    node = node[seg];
    if (!isPlainObject(node)) return `sets "${at}" to a value, but ${who} goes to "${target}" inside it`;
  }
  return undefined;
}

/**
 * Why the template cannot go with the field mapping: a template field that is a mapped target, holds one, or is a
 * value where a mapped target needs an object. Undefined when they fit.
 */
export function templateClash(template: Readonly<Record<string, unknown>>, fields: RequestFields): string | undefined {
  for (const source of REQUEST_SOURCES) {
    const clash = templatePathClash(template, fields[source], source, 'IMAGEGEN_REQUEST_FIELDS');
    if (clash) return clash;
  }
  return undefined;
}

/**
 * Why the idempotency key's body field (`IMAGEGEN_IDEMPOTENCY_FIELD`) cannot go with the body's other settings: it is,
 * holds or sits inside a request field's target, or the template sets it (or a value on its way). Undefined when
 * it fits.
 */
export function keyFieldClash(field: string, shape: RequestShape): string | undefined {
  const taken = REQUEST_SOURCES.find((s) => overlaps(shape.requestFields[s], field));
  if (taken) {
    const target = shape.requestFields[taken];
    return (
      (target === field
        ? `"${field}" is where ${taken} goes`
        : `"${field}" and "${target}", where ${taken} goes, are one inside the other`) +
      ' (IMAGEGEN_REQUEST_FIELDS): the key needs a field of its own'
    );
  }
  const clash = templatePathClash(shape.requestTemplate, field, 'the idempotency key', 'IMAGEGEN_IDEMPOTENCY_FIELD');
  return clash === undefined ? undefined : `IMAGEGEN_REQUEST_TEMPLATE ${clash}`;
}

/** A request whose own columns (`extra`) cannot be placed in the body; nothing was sent. */
export class RequestShapeError extends ImagebatchError {
  readonly code = ErrorCode.RequestShapeInvalid;
}

/** The settings {@link buildRequestBody} uses (a `ServiceConfig` has them). */
export interface RequestShape {
  requestFields: RequestFields;
  requestTemplate: Readonly<Record<string, unknown>>;
  /**
   * The body field that carries the idempotency key (`IMAGEGEN_IDEMPOTENCY_FIELD`).
   * @default undefined (the key travels in a header, not in the body)
   */
  idempotencyField?: string | undefined;
}

/** The documented body, with no template. */
export const DEFAULT_REQUEST_SHAPE: RequestShape = { requestFields: IDENTITY_FIELDS, requestTemplate: {} };

/**
 * Sets `value` at `segments` in `body`, making objects on the way; a non-object on the way is a problem, and so is a
 * value already there when `fresh`.
 */
function place(
  body: Record<string, unknown>,
  segments: readonly string[],
  value: unknown,
  fresh = false,
): string | undefined {
  let node = body;
  for (let i = 0; i < segments.length - 1; i++) {
    const seg = segments[i]!;
    const next = node[seg];
    if (next === undefined) {
      const made: Record<string, unknown> = {};
      node[seg] = made;
      node = made;
    } else if (isPlainObject(next)) {
      node = next;
    } else {
      return `"${segments.slice(0, i + 1).join('.')}" already holds a value`;
    }
  }
  const leaf = segments.at(-1)!;
  if (fresh && Object.hasOwn(node, leaf)) return `"${segments.join('.')}" already holds a value`;
  node[leaf] = value;
  return undefined;
}

/** Adds the template's fields that `body` lacks, recursing into objects both have. */
function mergeTemplate(body: Record<string, unknown>, template: Readonly<Record<string, unknown>>): void {
  for (const [k, v] of Object.entries(template)) {
    const have = body[k];
    if (have === undefined) body[k] = JSON.parse(JSON.stringify(v)) as unknown;
    else if (isPlainObject(have) && isPlainObject(v)) mergeTemplate(have, v);
    else throw new RequestShapeError(`IMAGEGEN_REQUEST_TEMPLATE field "${k}" clashes with a request field`);
  }
}

/**
 * The submit body of a request: the request fields at their targets (in the fixed order of
 * {@link REQUEST_SOURCES}), then the template's fields, then the row's own `extra` fields in sorted order (a row's
 * value wins over the template's), and last, given an `idempotencyKey` and a key field
 * ({@link RequestShape.idempotencyField}), the key at that field. Without the key, it is the request's content: the
 * same request under another key has the same body (its fingerprint). With it, the bytes a submission sends: the same
 * request, key and settings always give the same bytes, so a retry of the key sends what its first send did.
 * Throws {@link RequestShapeError} when an `extra` field is where a request field or the key goes.
 */
export function buildRequestBody(
  r: CreationRequest,
  shape: RequestShape = DEFAULT_REQUEST_SHAPE,
  idempotencyKey?: string,
): Record<string, unknown> {
  const fields = shape.requestFields;
  const keyField = shape.idempotencyField;
  const body: Record<string, unknown> = {};
  for (const source of REQUEST_SOURCES) {
    const value = r[source];
    if (value === undefined) continue;
    const problem = place(body, fields[source].split('.'), value);
    if (problem) throw new RequestShapeError(`IMAGEGEN_REQUEST_FIELDS: ${source}: ${problem}`);
  }
  mergeTemplate(body, shape.requestTemplate);
  // Only a plain map of strings is a row's own fields (the page reader makes nothing else); anything else is not.
  const extra: Record<string, unknown> =
    r.extra !== null && typeof r.extra === 'object' && !Array.isArray(r.extra) ? r.extra : {};
  for (const field of Object.keys(extra).sort()) {
    const value = extra[field];
    if (typeof value !== 'string') continue;
    const pathProblem = bodyPathProblem(field);
    if (pathProblem) throw new RequestShapeError(`column field ${pathProblem}`);
    const taken = REQUEST_SOURCES.find((s) => overlaps(fields[s], field));
    if (taken) {
      throw new RequestShapeError(
        `a --column field goes to "${field}", where ${taken} goes ("${fields[taken]}", IMAGEGEN_REQUEST_FIELDS): ` +
          'send it under another field',
      );
    }
    if (keyField !== undefined && overlaps(keyField, field)) {
      throw new RequestShapeError(
        `a --column field goes to "${field}", where the idempotency key goes ("${keyField}", ` +
          'IMAGEGEN_IDEMPOTENCY_FIELD): send it under another field',
      );
    }
    const problem = place(body, field.split('.'), value);
    if (problem) throw new RequestShapeError(`a --column field goes to "${field}", but ${problem} (the template's)`);
  }
  if (keyField !== undefined && idempotencyKey !== undefined) {
    const problem = place(body, keyField.split('.'), idempotencyKey, true);
    if (problem) throw new RequestShapeError(`IMAGEGEN_IDEMPOTENCY_FIELD: ${problem}`);
  }
  return body;
}
