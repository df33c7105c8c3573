import { z } from 'zod';
import type { ImageRef } from '../model';
import { discoverImages, MAX_LISTED_IMAGES } from './discover';
import {
  base64Image,
  boundedUrl,
  dataUriImage,
  DEFAULT_MAX_INLINE_IMAGE_BYTES,
  HTTP_URL,
  isPlainObject,
  sizeOf,
} from './inline-image';
import { childLocation, valuesAt } from './record-path';

/**
 * Schemas of the service's bodies: they accept the documented fields (service-interface.md and contract-defaults.md)
 * and ignore any others, so that a service adding fields breaks nothing.
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

/** Where a creation record carries its id, tried in order: `IMAGEGEN_ID_FIELDS`. contract-defaults.md's. */
export const DEFAULT_ID_FIELDS: readonly string[] = ['id'];
/** Where a creation record carries its status: `IMAGEGEN_STATUS_FIELDS`. contract-defaults.md's. */
export const DEFAULT_STATUS_FIELDS: readonly string[] = ['status'];
/** Where a failed creation's record carries the error text: `IMAGEGEN_ERROR_FIELDS`. contract-defaults.md's. */
export const DEFAULT_ERROR_FIELDS: readonly string[] = ['error'];
/**
 * Where a succeeded creation's record carries its images, tried in order: `IMAGEGEN_IMAGE_FIELDS`. The first is
 * contract-defaults.md's; the others are shapes services commonly use (a list of URLs, OpenAI's `data[]` of `url` or
 * `b64_json`, Replicate's `output`).
 */
export const DEFAULT_IMAGE_FIELDS: readonly string[] = [
  'images[].url',
  'images[]',
  'data[].url',
  'data[].b64_json',
  'output[]',
  'output',
  'outputs[]',
  'image_url',
  'image',
];
export { DEFAULT_MODEL_ID_FIELDS, parseModels } from './catalog';

/** Where the fields of a creation record are read (the settings above). */
export interface CreationFields {
  idFields: readonly string[];
  statusFields: readonly string[];
  errorFields: readonly string[];
}

const DEFAULT_CREATION_FIELDS: CreationFields = {
  idFields: DEFAULT_ID_FIELDS,
  statusFields: DEFAULT_STATUS_FIELDS,
  errorFields: DEFAULT_ERROR_FIELDS,
};

/** The longest creation id taken as one: a longer one would go into every poll URL and into workflow history. */
export const MAX_CREATION_ID_LENGTH = 1024;

/**
 * A creation record, as far as it is relied upon: its `id` (on submit) and `status` (on poll), each read at its own
 * paths, a value of a wrong type leaving it unset rather than hiding the others (a 202 with a numeric status still
 * gives its id); `error`, the service's text for a failed creation, of any type; and the record itself, where its
 * cost and images are read.
 */
export interface CreationRecord {
  id?: string;
  status?: string;
  error?: unknown;
  /** The record (inside its `data` or `creation` wrapper, if any). */
  fields: Readonly<Record<string, unknown>>;
}

const CreationId = z.union([z.string().min(1).max(MAX_CREATION_ID_LENGTH), z.number().transform(String)]);

/**
 * A creation record, at the root or wrapped in `data` or `creation`: the first of these that shows an id or a
 * status at the configured paths. Undefined when none does.
 */
export function parseCreation(
  body: unknown,
  fields: CreationFields = DEFAULT_CREATION_FIELDS,
): CreationRecord | undefined {
  const direct = readCreation(body, fields);
  if (direct) return direct;
  if (isPlainObject(body)) {
    for (const wrapper of ['data', 'creation']) {
      if (!Object.prototype.hasOwnProperty.call(body, wrapper)) continue;
      const inner = readCreation(body[wrapper], fields);
      if (inner) return inner;
    }
  }
  return undefined;
}

function readCreation(value: unknown, fields: CreationFields): CreationRecord | undefined {
  if (!isPlainObject(value)) return undefined;
  const id = first(value, fields.idFields, (v) => {
    const parsed = CreationId.safeParse(v);
    return parsed.success ? parsed.data : undefined;
  });
  const status = first(value, fields.statusFields, (v) => (typeof v === 'string' ? v : undefined));
  if (id === undefined && status === undefined) return undefined;
  const error = first(value, fields.errorFields, (v) => (v === null ? undefined : v));
  return {
    ...(id === undefined ? {} : { id }),
    ...(status === undefined ? {} : { status }),
    ...(error === undefined ? {} : { error }),
    fields: value,
  };
}

/** The first value at one of `paths` of `record` that `take` accepts (returns defined for). */
function first<T>(record: unknown, paths: readonly string[], take: (v: unknown) => T | undefined): T | undefined {
  for (const p of paths) {
    for (const { value } of valuesAt(record, p)) {
      const taken = take(value);
      if (taken !== undefined) return taken;
    }
  }
  return undefined;
}

export { DISCOVERED_SOURCE_SUFFIX, DiscoveryLimit, discoverImages, MAX_LISTED_IMAGES } from './discover';
export { DEFAULT_MAX_INLINE_IMAGE_BYTES, MAX_IMAGE_URL_LENGTH, maxInlineBase64Length } from './inline-image';

/** How images are read from a succeeded creation's record. */
export interface ImageReading {
  /** `IMAGEGEN_IMAGE_FIELDS`. @default DEFAULT_IMAGE_FIELDS */
  imageFields?: readonly string[];
  /** `IMAGEGEN_MAX_DOWNLOAD_BYTES`: bounds an inline image. @default DEFAULT_MAX_INLINE_IMAGE_BYTES */
  maxInlineBytes?: number;
  /** `IMAGEGEN_IMAGE_DISCOVERY`: whether a record whose image paths find nothing is searched. @default true */
  discovery?: boolean;
}

/**
 * The images of a succeeded creation: those found at the first of the image paths that finds any; when none does
 * (and discovery is on), those {@link discoverImages} finds anywhere in the record, its URLs as candidates that the
 * download keeps only when their bytes are an image. Each one's `source` says where it was found (`images[0].url`;
 * `result.artifact_location (discovered)`). At most {@link MAX_LISTED_IMAGES} are kept; an http(s) URL is cut to
 * {@link MAX_IMAGE_URL_LENGTH} + 1 characters at most, an inline image as {@link maxInlineBase64Length} says.
 */
export function imagesOf(record: CreationRecord, reading: ImageReading = {}): ImageRef[] {
  const maxInline = reading.maxInlineBytes ?? DEFAULT_MAX_INLINE_IMAGE_BYTES;
  for (const path of reading.imageFields ?? DEFAULT_IMAGE_FIELDS) {
    const out: ImageRef[] = [];
    for (const { value, at, holder } of valuesAt(record.fields, path)) {
      if (out.length >= MAX_LISTED_IMAGES) break;
      const image = configuredImage(value, at, holder, maxInline);
      if (image) out.push(image);
    }
    if (out.length > 0) return out;
  }
  return reading.discovery === false ? [] : discoverImages(record.fields, maxInline);
}

/** Field names of an object at an image path that hold its URL, tried in order. */
const OBJECT_URL_KEYS = ['url', 'uri', 'href', 'src'] as const;
/** Field names of an object at an image path that hold its bytes in base64, tried in order. */
const OBJECT_BASE64_KEYS = ['b64_json', 'base64', 'b64', 'image_base64', 'data'] as const;

/**
 * The image a value found at a configured image path is: a string (see {@link imageString}), or an object with one
 * of those under `url` (`uri`, `href`, `src`) or `b64_json` (`base64`, `b64`, `image_base64`, `data`), and its
 * `width` and `height`.
 */
function configuredImage(value: unknown, at: string, holder: object, maxInlineBytes: number): ImageRef | undefined {
  if (typeof value === 'string') {
    const url = imageString(value, maxInlineBytes);
    return url === undefined ? undefined : { url, ...sizeOf(Array.isArray(holder) ? undefined : holder), source: at };
  }
  if (!isPlainObject(value)) return undefined;
  for (const key of [...OBJECT_URL_KEYS, ...OBJECT_BASE64_KEYS]) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    const v = value[key];
    if (typeof v !== 'string') continue;
    const url = (OBJECT_URL_KEYS as readonly string[]).includes(key)
      ? imageString(v, maxInlineBytes)
      : (dataUriImage(v, maxInlineBytes) ?? base64Image(v, maxInlineBytes));
    if (url !== undefined) return { url, ...sizeOf(value), source: childLocation(at, key) };
  }
  return undefined;
}

/**
 * A string at an image path as an image: an inline one (a `data:image/...;base64,` URI, or base64 whose bytes are a
 * known image's), or else a URL when it looks like one (it has no white space, and a `:` or a `/`): one that is not
 * http(s) is kept so that its download is refused with a reason. Anything else (`"processing"`) is no image.
 */
function imageString(value: string, maxInlineBytes: number): string | undefined {
  if (HTTP_URL.test(value)) return boundedUrl(value);
  const inline = dataUriImage(value, maxInlineBytes) ?? base64Image(value, maxInlineBytes);
  if (inline !== undefined) return inline;
  return !/\s/.test(value) && /[:/]/.test(value) ? boundedUrl(value) : undefined;
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
