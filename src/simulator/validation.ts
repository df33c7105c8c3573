/**
 * Validation of the submit body (contract-defaults.md, "The submit body"). Hand-written rather than zod so that every
 * problem is reported at once, with the field name and a message a person can act on, and so that no input
 * shape (arrays, nulls, huge numbers, prototype keys) can make it throw.
 */

export interface FieldError {
  field: string;
  message: string;
}

/** A valid creation request, with defaults applied. */
export interface ValidCreationBody {
  prompt: string;
  model: string;
  negativePrompt: string | undefined;
  width: number;
  height: number;
  seed: number | undefined;
  numImages: number;
}

export type ValidationResult = { ok: true; value: ValidCreationBody } | { ok: false; errors: FieldError[] };

const KNOWN_FIELDS = new Set(['prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images']);
export const DEFAULT_SIZE = 1024;
const MAX_SEED = 2 ** 32 - 1;

/** 1..255 printable ASCII characters (contract-defaults.md). */
export function idempotencyKeyProblem(value: string): string | undefined {
  if (value.length < 1 || value.length > 255) return 'must be 1 to 255 characters';
  if (!/^[\x20-\x7e]+$/.test(value)) return 'must contain printable ASCII characters only';
  return undefined;
}

function integerIn(
  body: Record<string, unknown>,
  field: string,
  min: number,
  max: number,
  errors: FieldError[],
): number | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    errors.push({ field, message: 'must be an integer' });
    return undefined;
  }
  if (value < min || value > max) {
    errors.push({ field, message: `must be between ${min} and ${max}` });
    return undefined;
  }
  return value;
}

function dimension(body: Record<string, unknown>, field: string, errors: FieldError[]): number {
  const value = integerIn(body, field, 256, 2048, errors);
  if (value !== undefined && value % 64 !== 0) {
    errors.push({ field, message: 'must be a multiple of 64' });
    return DEFAULT_SIZE;
  }
  return value ?? DEFAULT_SIZE;
}

/** Where the body's fields are (config `requestLayout`): moved fields, and extra fields accepted or demanded. */
export interface RequestLayout {
  fields: Partial<Record<string, string>>;
  extraFields: Record<string, 'required' | 'optional'>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads a body laid out as `layout` says into the flat body contract-defaults.md describes, reporting (by dotted path) every
 * field that is not a known one, and every required extra field that is missing. Field errors of the flat body are
 * then named by their paths.
 */
function flatten(
  body: Record<string, unknown>,
  layout: RequestLayout,
  errors: FieldError[],
): { flat: Record<string, unknown>; pathOf: (field: string) => string } {
  const where = new Map<string, string>(); // path -> flat field name
  for (const field of KNOWN_FIELDS) where.set(layout.fields[field] ?? field, field);
  const extras = new Set(Object.keys(layout.extraFields));
  const leaves = new Set([...where.keys(), ...extras]);
  const inner = new Set<string>();
  for (const leaf of leaves) {
    const segments = leaf.split('.');
    for (let i = 1; i < segments.length; i++) inner.add(segments.slice(0, i).join('.'));
  }
  const flat: Record<string, unknown> = {};
  const present = new Set<string>();
  const walk = (node: Record<string, unknown>, prefix: string): void => {
    for (const [key, value] of Object.entries(node)) {
      const at = prefix ? `${prefix}.${key}` : key;
      if (leaves.has(at)) {
        present.add(at);
        const field = where.get(at);
        if (field !== undefined) flat[field] = value;
      } else if (inner.has(at) && isObject(value)) walk(value, at);
      else errors.push({ field: at, message: inner.has(at) ? 'must be a JSON object' : 'is not a known field' });
    }
  };
  walk(body, '');
  for (const [path, need] of Object.entries(layout.extraFields)) {
    if (need === 'required' && !present.has(path)) errors.push({ field: path, message: 'is required' });
  }
  return { flat, pathOf: (field) => layout.fields[field] ?? field };
}

/** Validates a parsed JSON value as a submit body, laid out as contract-defaults.md says or as `layout` says. */
export function validateCreationBody(body: unknown, layout?: RequestLayout): ValidationResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, errors: [{ field: 'body', message: 'must be a JSON object' }] };
  }
  const custom =
    layout !== undefined && (Object.keys(layout.fields).length > 0 || Object.keys(layout.extraFields).length > 0);
  if (custom) {
    const layoutErrors: FieldError[] = [];
    const { flat, pathOf } = flatten(body as Record<string, unknown>, layout, layoutErrors);
    const result = validateCreationBody(flat);
    if (result.ok && layoutErrors.length === 0) return result;
    const fieldErrors = result.ok ? [] : result.errors.map((e) => ({ ...e, field: pathOf(e.field) }));
    return { ok: false, errors: [...layoutErrors, ...fieldErrors] };
  }
  const record = body as Record<string, unknown>;
  const errors: FieldError[] = [];
  for (const field of Object.keys(record)) {
    if (!KNOWN_FIELDS.has(field)) errors.push({ field, message: 'is not a known field' });
  }

  const prompt = record.prompt;
  let promptValue = '';
  if (prompt === undefined) errors.push({ field: 'prompt', message: 'is required' });
  else if (typeof prompt !== 'string') errors.push({ field: 'prompt', message: 'must be a string' });
  else {
    promptValue = prompt.trim();
    if (promptValue.length < 1) errors.push({ field: 'prompt', message: 'must not be empty' });
    else if (promptValue.length > 4000) errors.push({ field: 'prompt', message: 'must be at most 4000 characters' });
  }

  const model = record.model;
  if (model === undefined) errors.push({ field: 'model', message: 'is required' });
  else if (typeof model !== 'string' || model.length === 0)
    errors.push({ field: 'model', message: 'must be a non-empty string' });

  const negative = record.negative_prompt;
  if (negative !== undefined) {
    if (typeof negative !== 'string') errors.push({ field: 'negative_prompt', message: 'must be a string' });
    else if (negative.length > 2000)
      errors.push({ field: 'negative_prompt', message: 'must be at most 2000 characters' });
  }

  const width = dimension(record, 'width', errors);
  const height = dimension(record, 'height', errors);
  const seed = integerIn(record, 'seed', 0, MAX_SEED, errors);
  const numImages = integerIn(record, 'num_images', 1, 4, errors) ?? 1;

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      prompt: promptValue,
      model: model as string,
      negativePrompt: negative as string | undefined,
      width,
      height,
      seed,
      numImages,
    },
  };
}
