/**
 * The top-level field names of a creation record, for a message about a record that shows no image: names only,
 * never values (a value may be a signed URL, a prompt, or megabytes of base64), and bounded, since they travel in an
 * activity result into Temporal history.
 */

/** Field names kept at most; a record with more says so with a last entry `…(+N more)`. */
export const MAX_RECORD_KEYS = 50;
/** The longest field name kept; a longer one is cut and ends with `…`. */
export const MAX_RECORD_KEY_LENGTH = 64;

/** The top-level field names of `record` (none for a value that is not a plain object), bounded as above. */
export function recordKeysOf(record: unknown): string[] {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) return [];
  // A parsed record keeps every field the body had (one of a wrong type too, as undefined), and adds none.
  const keys = Object.keys(record);
  const kept = keys.slice(0, MAX_RECORD_KEYS).map((k) => {
    // Control characters would reach a terminal; the CLI cleans its output too.
    // eslint-disable-next-line no-control-regex -- control characters are what is removed
    const name = k.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
    return name.length > MAX_RECORD_KEY_LENGTH ? `${name.slice(0, MAX_RECORD_KEY_LENGTH - 1)}…` : name;
  });
  if (keys.length > MAX_RECORD_KEYS) kept.push(`…(+${keys.length - MAX_RECORD_KEYS} more)`);
  return kept;
}
