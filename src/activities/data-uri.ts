/** Inline images (`data:` URIs) as the download decodes them, and text bounded for results (src/activities/download.ts). */

/** The longest media type (with its parameters) of a data: URI kept in a description. */
export const MAX_MEDIA_TYPE_LENGTH = 100;

/** `s` without control characters, cut to `max` characters (then ending with `…`). */
export function clipText(s: string, max: number): string {
  // eslint-disable-next-line no-control-regex -- control characters are what is removed
  const clean = s.slice(0, max + 1).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/**
 * Decodes a data: URI: `data:[<type>][;<param>]*;base64,<data>`. Base64 only (standard or URL-safe alphabet,
 * whitespace ignored, padding optional); anything else is refused with a reason. The declared type is returned for
 * messages only: the bytes decide what the file is.
 */
export function decodeDataUri(
  url: string,
  limit: (bytes: number) => string | undefined,
): { bytes: Buffer; mediaType: string } | { refused: string } {
  const comma = url.indexOf(',');
  if (comma < 0) return { refused: "malformed data URI: no ',' before its data" };
  const params = url.slice(5, comma).split(';');
  const mediaType = clipText(params[0]?.trim() || '(no type)', MAX_MEDIA_TYPE_LENGTH);
  if (!params.slice(1).some((p) => p.trim().toLowerCase() === 'base64')) {
    return { refused: 'malformed data URI: not base64 (only `;base64,` data URIs are read)' };
  }
  const data = url.slice(comma + 1).replace(/\s+/g, '');
  const body = data.replace(/={1,2}$/, '');
  if (body === '') return { refused: 'malformed data URI: no data' };
  // The size is known before decoding: what is over a limit is never decoded.
  const over = limit(Math.floor((body.length * 3) / 4));
  if (over) return { refused: over };
  if (!/^[A-Za-z0-9+/_-]*$/.test(body) || body.length % 4 === 1 || (body !== data && data.length % 4 !== 0)) {
    return { refused: 'malformed data URI: its data is not valid base64' };
  }
  return { bytes: Buffer.from(body, 'base64'), mediaType };
}

/** The longest `source` (a path in the record) kept in a result. */
const MAX_SOURCE_LENGTH = 200;

/** Whether an image's URL is an inline image (`data:...`), saved from the poll's own bytes rather than fetched. */
export function isDataUri(url: string): boolean {
  return /^data:/i.test(url);
}

/**
 * What may stand for an image's URL in anything that leaves the activity (results and failures go into Temporal
 * history, the ledger and the results files): an http(s) URL as it is, a data: URI as its declared type, its size
 * and where it was found, never its data: `data:image/png;base64 (12345 bytes) at data[0].b64_json`. The size is
 * `bytes` when known, else the length of its data in characters.
 */
export function describeImageUrl(url: string, source?: string, bytes?: number): string {
  if (!isDataUri(url)) return url;
  const comma = url.indexOf(',');
  const header = comma < 0 ? 'data:(no comma)' : clipText(url.slice(0, comma), MAX_MEDIA_TYPE_LENGTH + 5);
  const size = bytes !== undefined ? `${bytes} bytes` : `${comma < 0 ? url.length : url.length - comma - 1} characters`;
  return `${header} (${size})${source === undefined ? '' : ` at ${clipText(source, MAX_SOURCE_LENGTH)}`}`;
}

/** Where a record held an image, bounded for results (a hostile record's field names may be long). */
export function clipSource(source: string): string {
  return clipText(source, MAX_SOURCE_LENGTH);
}
