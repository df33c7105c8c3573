/**
 * Validation of the submit body (gaps.md "Submit request body"). Hand-written rather than zod so that every
 * problem is reported at once, with the field name and a message a person can act on, and so that no input
 * shape (arrays, nulls, huge numbers, prototype keys) can make it throw.
 */

export interface FieldError {
  field: string;
  message: string;
}

/** A valid creation request, with defaults applied. */
export interface CreationRequest {
  prompt: string;
  model: string;
  negativePrompt: string | undefined;
  width: number;
  height: number;
  seed: number | undefined;
  numImages: number;
}

export type ValidationResult = { ok: true; value: CreationRequest } | { ok: false; errors: FieldError[] };

const KNOWN_FIELDS = new Set(['prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images']);
export const DEFAULT_SIZE = 1024;
const MAX_SEED = 2 ** 32 - 1;

/** 1..255 printable ASCII characters (gaps.md). */
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

/** Validates a parsed JSON value as a submit body. */
export function validateCreationBody(body: unknown): ValidationResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, errors: [{ field: 'body', message: 'must be a JSON object' }] };
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
