import { IMAGE_MEDIA_TYPES, SNIFF_BYTES, sniffImageType } from './image-type';

/**
 * Images as a creation record holds them: an http(s) URL, a `data:` URI, or base64 bytes. Shared by the configured
 * image paths (`src/api/schemas.ts`) and discovery (`src/api/discover.ts`).
 */

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

/** An http(s) URL: the scheme and at least one character after it. */
export const HTTP_URL = /^https?:\/\/\S/i;

/** `value` cut to {@link MAX_IMAGE_URL_LENGTH} + 1 characters at most. */
export function boundedUrl(value: string): string {
  return value.slice(0, MAX_IMAGE_URL_LENGTH + 1);
}

/** The head of an inline image URI: `data:image/<subtype>[;param...];base64,`, looked for in its first characters. */
const DATA_URI_HEAD = /^data:(image\/[a-z0-9.+-]+)(?:;[^;,]*)*?;base64,/i;
const DATA_URI_HEAD_MAX = 256;

/**
 * A base64 `data:` URI of any declared type (`application/octet-stream`...) whose bytes are an image's, as a
 * normalised inline image URI of the type its bytes say; undefined otherwise.
 */
export function sniffedDataUri(value: string, maxInlineBytes: number): string | undefined {
  if (!/^data:/i.test(value)) return undefined;
  const head = ANY_BASE64_HEAD.exec(value.slice(0, DATA_URI_HEAD_MAX));
  return head ? base64Image(value.slice(head[0].length), maxInlineBytes) : undefined;
}
const ANY_BASE64_HEAD = /^data:[^,]*;base64,/i;

/** `value` as a normalised inline image URI (`data:<type>;base64,<standard base64>`), or undefined if it is not one. */
export function dataUriImage(value: string, maxInlineBytes: number): string | undefined {
  if (!/^data:/i.test(value)) return undefined;
  const head = DATA_URI_HEAD.exec(value.slice(0, DATA_URI_HEAD_MAX));
  if (!head) return undefined;
  const payload = standardBase64(value.slice(head[0].length));
  if (payload === undefined || payload.length === 0) return undefined;
  return inlineUri((head[1] ?? '').toLowerCase(), payload, maxInlineBytes);
}

/** `value` as an inline image URI when it is base64 whose first bytes are a known image's; undefined otherwise. */
export function base64Image(value: string, maxInlineBytes: number): string | undefined {
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

/** The `width` and `height` of the object that holds an image, when they are numbers. */
export function sizeOf(holder: object | undefined): { width?: number; height?: number } {
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

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
