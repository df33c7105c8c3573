import { z } from 'zod';
import type { ImageRef } from '../model';
import { IMAGE_MEDIA_TYPES, SNIFF_BYTES, sniffImageType } from './image-type';
import { childLocation, valuesAt } from './record-path';

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

/** Where a creation record carries its id, tried in order: `IMAGEGEN_ID_FIELDS`. gaps.md's. */
export const DEFAULT_ID_FIELDS: readonly string[] = ['id'];
/** Where a creation record carries its status: `IMAGEGEN_STATUS_FIELDS`. gaps.md's. */
export const DEFAULT_STATUS_FIELDS: readonly string[] = ['status'];
/** Where a failed creation's record carries the error text: `IMAGEGEN_ERROR_FIELDS`. gaps.md's. */
export const DEFAULT_ERROR_FIELDS: readonly string[] = ['error'];
/**
 * Where a succeeded creation's record carries its images, tried in order: `IMAGEGEN_IMAGE_FIELDS`. The first is
 * gaps.md's; the others are shapes services commonly use (a list of URLs, OpenAI's `data[]` of `url` or `b64_json`,
 * Replicate's `output`).
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

/**
 * The most image entries kept from one creation record. The contract allows 4 images per creation; a record that
 * lists more than this says at least this many, and the activity refuses it (see `src/activities/image-limits.ts`),
 * so a record listing thousands of URLs never becomes thousands of downloads or an activity result near Temporal's
 * payload limit.
 */
export const MAX_LISTED_IMAGES = 16;

/**
 * The longest image URL downloaded. A longer one is kept cut to one character more than this (so that it is both
 * small and recognisably too long) and its download is refused. It bounds http(s) URLs only: an inline image (a
 * `data:` URI) is bounded by {@link maxInlineBase64Length} instead.
 */
export const MAX_IMAGE_URL_LENGTH = 2048;

/** What `IMAGEGEN_MAX_DOWNLOAD_BYTES` is by default, for callers that pass no limit (the client always passes it). */
export const DEFAULT_MAX_INLINE_IMAGE_BYTES = 50 * 1024 * 1024;

/**
 * The longest base64 text of an inline image kept whole: the encoding of `maxBytes` bytes (4 characters per 3 bytes).
 * A longer one is kept cut to 4 characters more than this, which decode to more than `maxBytes` bytes, so that
 * saving it is refused as too large, as a download past `IMAGEGEN_MAX_DOWNLOAD_BYTES` is, while the record's
 * megabytes never reach an activity result.
 */
export function maxInlineBase64Length(maxBytes: number): number {
  return 4 * Math.ceil(Math.max(0, maxBytes) / 3);
}

/** Appended to the `source` of an image the configured paths did not find, but {@link discoverImages} did. */
export const DISCOVERED_SOURCE_SUFFIX = ' (discovered)';

/** How images are read from a succeeded creation's record. */
export interface ImageReading {
  /** `IMAGEGEN_IMAGE_FIELDS`. @default DEFAULT_IMAGE_FIELDS */
  imageFields?: readonly string[];
  /** `IMAGEGEN_MAX_DOWNLOAD_BYTES`: bounds an inline image. @default DEFAULT_MAX_INLINE_IMAGE_BYTES */
  maxInlineBytes?: number;
}

/**
 * The images of a succeeded creation: those found at the first of the image paths that finds any; when none does,
 * those {@link discoverImages} finds anywhere in the record. Each one's `source` says where it was found
 * (`images[0].url`; `result.files[1].href (discovered)`). At most {@link MAX_LISTED_IMAGES} are kept; an http(s) URL
 * is cut to {@link MAX_IMAGE_URL_LENGTH} + 1 characters at most, an inline image as {@link maxInlineBase64Length}
 * says.
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
  return discoverImages(record.fields, maxInline);
}

/** Field names that hold an image's URL, or a list of them (lower case, without `_` and `-`). */
const URL_KEYS: ReadonlySet<string> = new Set([
  'url',
  'uri',
  'href',
  'src',
  'image',
  'images',
  'imageurl',
  'imageuri',
  'output',
  'outputs',
  'outputurl',
  'file',
  'files',
  'fileurl',
  'result',
  'results',
  'resulturl',
  'downloadurl',
]);
/** Field names of an object at an image path that hold its URL, tried in order. */
const OBJECT_URL_KEYS = ['url', 'uri', 'href', 'src'] as const;
/** Field names of an object at an image path that hold its bytes in base64, tried in order. */
const OBJECT_BASE64_KEYS = ['b64_json', 'base64', 'b64', 'image_base64', 'data'] as const;
/** A field whose (normalised) name contains one of these may hold base64 image bytes. */
const BASE64_KEY = /b64|base64/;
/**
 * Fields not searched: what a record echoes of the request (an input image of an image-to-image model is not a
 * result).
 */
const SKIPPED_KEYS: ReadonlySet<string> = new Set(['input', 'inputs', 'request', 'params', 'parameters']);

/** How deep {@link discoverImages} looks (the record is depth 0), and how many values it looks at, at most. */
export const DiscoveryLimit = { depth: 8, values: 10_000 } as const;

const normalKey = (key: string) => key.toLowerCase().replace(/[_-]/g, '');

/**
 * Images anywhere in a record whose image paths found none, in document order, looking at most
 * {@link DiscoveryLimit}.depth levels deep and at {@link DiscoveryLimit}.values values: an http(s) URL in a field
 * named like `url`, `uri`, `href`, `src`, `image(s)`, `output(s)`, `file(s)`, `result(s)` (or in a list held by one),
 * a `data:image/...;base64,` URI in any field, and base64 bytes in a field named like `b64_json`, `base64`, `b64` or
 * `image_base64` that start with a known image's magic number. What a record echoes of the request (`input`,
 * `request`, `params`...) is not searched. Each image's `source` ends with {@link DISCOVERED_SOURCE_SUFFIX}.
 */
export function discoverImages(record: unknown, maxInlineBytes = DEFAULT_MAX_INLINE_IMAGE_BYTES): ImageRef[] {
  const out: ImageRef[] = [];
  let looked = 0;
  const full = () => out.length >= MAX_LISTED_IMAGES || looked >= DiscoveryLimit.values;
  const visit = (value: unknown, at: string, key: string, holder: object | undefined, depth: number): void => {
    looked++;
    if (typeof value === 'string') {
      const image = discoveredImage(value, key, maxInlineBytes);
      if (image) out.push({ ...image, ...sizeOf(holder), source: `${at}${DISCOVERED_SOURCE_SUFFIX}` });
      return;
    }
    if (value === null || typeof value !== 'object' || depth >= DiscoveryLimit.depth) return;
    if (Array.isArray(value)) {
      // The elements of a list are read as if held by the list's own field (`files: ["https://..."]`).
      for (let i = 0; i < value.length && !full(); i++) {
        visit(value[i], childLocation(at, i), key, undefined, depth + 1);
      }
      return;
    }
    for (const name of Object.keys(value)) {
      if (full()) return;
      if (SKIPPED_KEYS.has(normalKey(name))) continue;
      visit((value as Record<string, unknown>)[name], childLocation(at, name), name, value, depth + 1);
    }
  };
  if (isPlainObject(record)) visit(record, '', '', undefined, 0);
  return out;
}

/** The image a string found by discovery in a field named `key` is, if any. */
function discoveredImage(value: string, key: string, maxInlineBytes: number): { url: string } | undefined {
  const inline = dataUriImage(value, maxInlineBytes);
  if (inline !== undefined) return { url: inline };
  const name = normalKey(key);
  if (URL_KEYS.has(name) && HTTP_URL.test(value)) return { url: value.slice(0, MAX_IMAGE_URL_LENGTH + 1) };
  if (BASE64_KEY.test(name)) {
    const b64 = base64Image(value, maxInlineBytes);
    if (b64 !== undefined) return { url: b64 };
  }
  return undefined;
}

const HTTP_URL = /^https?:\/\/\S/i;

/**
 * The image a value found at a configured image path is: a string (see {@link imageString}), or an object with one of those under `url` (`uri`, `href`,
 * `src`) or `b64_json` (`base64`, `b64`, `image_base64`, `data`), and its `width` and `height`.
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
  if (HTTP_URL.test(value)) return value.slice(0, MAX_IMAGE_URL_LENGTH + 1);
  const inline = dataUriImage(value, maxInlineBytes) ?? base64Image(value, maxInlineBytes);
  if (inline !== undefined) return inline;
  return !/\s/.test(value) && /[:/]/.test(value) ? value.slice(0, MAX_IMAGE_URL_LENGTH + 1) : undefined;
}

function sizeOf(holder: object | undefined): { width?: number; height?: number } {
  if (holder === undefined) return {};
  const h = holder as Record<string, unknown>;
  const dim = (name: string) => {
    const v = Object.prototype.hasOwnProperty.call(h, name) ? h[name] : undefined;
    return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
  };
  const width = dim('width');
  const height = dim('height');
  return { ...(width === undefined ? {} : { width }), ...(height === undefined ? {} : { height }) };
}

/** The head of an inline image URI: `data:image/<subtype>[;param...];base64,`, looked for in its first characters. */
const DATA_URI_HEAD = /^data:(image\/[a-z0-9.+-]+)(?:;[^;,]*)*?;base64,/i;
const DATA_URI_HEAD_MAX = 256;

/** `value` as a normalised inline image URI (`data:<type>;base64,<standard base64>`), or undefined if it is not one. */
function dataUriImage(value: string, maxInlineBytes: number): string | undefined {
  if (!/^data:/i.test(value)) return undefined;
  const head = DATA_URI_HEAD.exec(value.slice(0, DATA_URI_HEAD_MAX));
  if (!head) return undefined;
  const payload = standardBase64(value.slice(head[0].length));
  if (payload === undefined || payload.length === 0) return undefined;
  return inlineUri((head[1] ?? '').toLowerCase(), payload, maxInlineBytes);
}

/** `value` as an inline image URI when it is base64 whose first bytes are a known image's; undefined otherwise. */
function base64Image(value: string, maxInlineBytes: number): string | undefined {
  if (value.length < 8) return undefined;
  const payload = standardBase64(value);
  if (payload === undefined) return undefined;
  const head = Buffer.from(payload.slice(0, 4 * Math.ceil(SNIFF_BYTES / 3)), 'base64');
  const ext = sniffImageType(head, payload.length <= 4 * Math.ceil(SNIFF_BYTES / 3));
  const type = typeof ext === 'string' ? IMAGE_MEDIA_TYPES[ext] : undefined;
  return type === undefined ? undefined : inlineUri(type, payload, maxInlineBytes);
}

/** Base64 text without white space, in the standard alphabet (the URL-safe one converted); undefined if not base64. */
function standardBase64(text: string): string | undefined {
  const compact = /\s/.test(text) ? text.replace(/\s+/g, '') : text;
  if (/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) return compact;
  if (/^[A-Za-z0-9_-]*={0,2}$/.test(compact)) return compact.replace(/-/g, '+').replace(/_/g, '/');
  return undefined;
}

function inlineUri(type: string, payload: string, maxInlineBytes: number): string {
  const limit = maxInlineBase64Length(maxInlineBytes);
  return `data:${type};base64,${payload.length > limit ? payload.slice(0, limit + 4) : payload}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
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
