/**
 * Redaction of the API key from what the service sends back. The key is removed whole and also its 40-character
 * token (the part after the last `live_`, see api-key.ts), in each of the forms a JSON text can spell it: raw, and
 * with any of its characters escaped (`\u005f` for `_`, `\/` ...), which `JSON.parse` would turn back into the key.
 */

export const REDACTED = '[REDACTED]';

const MARKER = 'live_';
const TOKEN_LENGTH = 40;

/** The strings to remove for a key: the key itself, then its token when the key has one. */
export function secretsOf(key: string | undefined): string[] {
  if (!key) return [];
  const at = key.lastIndexOf(MARKER);
  const token = at < 0 ? '' : key.slice(at + MARKER.length);
  return token.length === TOKEN_LENGTH && token !== key ? [key, token] : [key];
}

/** Replaces the key and its token in a decoded string (a parsed JSON string, a message). */
export function redactSecret(text: string, key: string | undefined): string {
  let out = text;
  for (const s of secretsOf(key)) if (out.includes(s)) out = out.split(s).join(REDACTED);
  return out;
}

const patterns = new Map<string, RegExp>();

/**
 * Replaces the key and its token in raw response text, however JSON escapes spell them: each UTF-16 unit may be
 * itself or `\uXXXX` (hex digits of either case), and `"`, `\` and `/` may be `\"`, `\\`, `\/`.
 */
export function redactRawText(text: string, key: string | undefined): string {
  let out = text;
  for (const s of secretsOf(key)) {
    let re = patterns.get(s);
    if (re === undefined) {
      re = new RegExp([...Array(s.length).keys()].map((i) => unitPattern(s.charCodeAt(i))).join(''), 'g');
      if (patterns.size > 16) patterns.clear();
      patterns.set(s, re);
    }
    // A plain scan first: most texts hold neither the key nor a backslash that could spell it.
    if (!out.includes(s) && !out.includes('\\')) continue;
    out = out.replace(re, REDACTED);
  }
  return out;
}

/**
 * A copy of a parsed JSON value (or an outcome made of one) with the key and its token redacted from every string
 * in it, object keys included. Depth is bounded: anything nested deeper than `maxDepth` is replaced whole.
 */
export function redactJsonValue<T>(value: T, key: string | undefined, maxDepth = 64): T {
  if (secretsOf(key).length === 0) return value;
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return redactSecret(v, key);
    if (v === null || typeof v !== 'object') return v;
    if (depth >= maxDepth) return REDACTED;
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[redactSecret(k, key)] = walk(x, depth + 1);
    return out;
  };
  return walk(value, 0) as T;
}

function unitPattern(unit: number): string {
  const plain = unit.toString(16).padStart(4, '0');
  const hex = plain
    .split('')
    .map((d) => (/[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : d))
    .join('');
  const alternatives = [`\\\\u${hex}`];
  const c = String.fromCharCode(unit);
  if (c === '"' || c === '\\' || c === '/') alternatives.push(`\\\\\\${c}`);
  // A lone surrogate is matched as its code unit; anything else as itself, escaped for the RegExp.
  alternatives.push(unit >= 0xd800 && unit <= 0xdfff ? `\\u${plain}` : c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'));
  return `(?:${alternatives.join('|')})`;
}
