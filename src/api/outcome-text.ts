/** Text and values an outcome copies from a service's body, bounded (src/api/classify.ts). */

/**
 * Bounds on the text and lists an outcome copies from a body. Outcomes travel into workflow history (failure
 * details, row results), so a hostile or broken body of a megabyte must not become a megabyte of history.
 */
export const OutcomeLimit = {
  /** Characters of one text copied from a body: a message, a code, a status, a field error. */
  text: 500,
  /** Field errors kept from a 400's `details.errors`. */
  fieldErrors: 20,
} as const;

/**
 * A value as short text: strings as they are, anything else as JSON; clipped. A value nested too deeply for
 * `JSON.stringify` (which recurses: 100,000 nested arrays overflow the stack) is described, not thrown.
 */
export function text(v: unknown): string {
  if (typeof v === 'string') return clip(v);
  try {
    return clip(JSON.stringify(v) ?? '');
  } catch {
    return Array.isArray(v) ? '[nested too deeply]' : '{nested too deeply}';
  }
}

/** Text from a body, cut to {@link OutcomeLimit.text} characters (not inside a surrogate pair). */
export function clip(s: string): string {
  if (s.length <= OutcomeLimit.text) return s;
  let end = OutcomeLimit.text - 3;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${s.slice(0, end)}...`;
}

/** `v` as an object's fields, or none. */
export function asRecord(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
