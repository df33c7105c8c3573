import { z } from 'zod';
import type { ImageRef, ModelInfo } from '../activities/types';
import { readUsd } from './money';

/**
 * Schemas of the service's bodies: they accept the documented fields (service-interface.md and gaps.md) and
 * ignore any others, so that a service adding fields breaks nothing.
 */

/** The error envelope: `{ error: { code, message, details } }`. */
export const ErrorEnvelope = z.looseObject({
  error: z.looseObject({
    code: z.string(),
    message: z.string().optional(),
    details: z.unknown().optional(),
  }),
});
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

/** The plain authentication-failure body: `{ detail }`. */
export const AuthFailureBody = z.looseObject({ detail: z.string() });

const ImageRefSchema = z.looseObject({
  url: z.string().min(1),
  width: z.number().optional().catch(undefined),
  height: z.number().optional().catch(undefined),
});

/** The longest creation id taken as one: a longer one would go into every poll URL and into workflow history. */
export const MAX_CREATION_ID_LENGTH = 1024;

/**
 * A creation record; only `id` (on submit) and `status` (on poll) are relied upon. Each field is read on its own
 * (`catch`): one field of a wrong type leaves it unset instead of hiding the others, so a 202 with a numeric
 * `status` still gives its id. `error` is the service's text for a failed creation, of any type.
 */
export const CreationRecord = z.looseObject({
  id: z
    .union([z.string().min(1).max(MAX_CREATION_ID_LENGTH), z.number().transform(String)])
    .optional()
    .catch(undefined),
  status: z.string().optional().catch(undefined),
  error: z.unknown().optional(),
  images: z.array(z.unknown()).optional().catch(undefined),
});
export type CreationRecord = z.infer<typeof CreationRecord>;

/** A creation record, at the root or wrapped in `data` or `creation`. */
export function parseCreation(body: unknown): CreationRecord | undefined {
  const direct = CreationRecord.safeParse(body);
  if (direct.success && (direct.data.id !== undefined || direct.data.status !== undefined)) return direct.data;
  if (body !== null && typeof body === 'object') {
    for (const wrapper of ['data', 'creation']) {
      const inner = CreationRecord.safeParse((body as Record<string, unknown>)[wrapper]);
      if (inner.success && (inner.data.id !== undefined || inner.data.status !== undefined)) return inner.data;
    }
  }
  return undefined;
}

/**
 * The most image entries kept from one creation record. The contract allows 4 images per creation; a record that
 * lists more than this says at least this many, and the activity refuses it (see `src/activities/image-limits.ts`),
 * so a record listing thousands of URLs never becomes thousands of downloads or an activity result near Temporal's
 * payload limit.
 */
export const MAX_LISTED_IMAGES = 16;

/**
 * The longest image URL downloaded. A longer one is kept cut to one character more than this (so that it is both
 * small and recognisably too long) and its download is refused.
 */
export const MAX_IMAGE_URL_LENGTH = 2048;

/**
 * The images of a creation; entries without a URL are left out. At most {@link MAX_LISTED_IMAGES} are kept, and
 * each URL is cut to {@link MAX_IMAGE_URL_LENGTH} + 1 characters at most.
 */
export function imagesOf(record: CreationRecord): ImageRef[] {
  const out: ImageRef[] = [];
  for (const item of record.images ?? []) {
    if (out.length >= MAX_LISTED_IMAGES) break;
    const parsed = ImageRefSchema.safeParse(item);
    if (!parsed.success) continue;
    const { width, height } = parsed.data;
    const url = parsed.data.url.slice(0, MAX_IMAGE_URL_LENGTH + 1);
    out.push({ url, ...(width === undefined ? {} : { width }), ...(height === undefined ? {} : { height }) });
  }
  return out;
}

const ModelRecord = z.looseObject({
  id: z.union([z.string().min(1), z.number().transform(String)]),
  name: z.string().optional().catch(undefined),
});

/**
 * The model catalog: an array at the root or under `data`, `models` or `items`. Entries without an id are
 * left out. Undefined when the body has no such array. A model's price is read at `priceFields` (see `readUsd`); a
 * model that shows none has no `priceUsd` (unknown, not free).
 */
export function parseModels(body: unknown, priceFields: readonly string[]): ModelInfo[] | undefined {
  let list: unknown = body;
  if (!Array.isArray(list) && list !== null && typeof list === 'object') {
    const obj = list as Record<string, unknown>;
    list = [obj.data, obj.models, obj.items].find((x) => Array.isArray(x));
  }
  if (!Array.isArray(list)) return undefined;
  const out: ModelInfo[] = [];
  for (const item of list) {
    const parsed = ModelRecord.safeParse(item);
    if (!parsed.success) continue;
    const { id, name } = parsed.data;
    const priceUsd = readUsd(item, priceFields);
    out.push({ id, ...(name === undefined ? {} : { name }), ...(priceUsd === undefined ? {} : { priceUsd }) });
  }
  return out;
}

/** Parses JSON without throwing: undefined for an empty or malformed body. */
export function parseJson(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
