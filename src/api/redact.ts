/**
 * Redaction of the API key from what the service sends back. The key is removed whole and also its 40-character
 * token (the part after the last `live_`, see api-key.ts), in every form a service could echo it in:
 *
 * - raw, in hex, and in base64 or base64url at each of the three byte offsets it can have inside a longer encoded
 *   text (`Bearer <key>`, `user:<key>`), padded or not;
 * - each of these spelled with escapes, up to {@link MAX_ESCAPE_LAYERS} layers deep: JSON's `\uXXXX`, `\"`, `\\`,
 *   `\/` (a JSON string holding JSON text is two layers), URL percent-encoding (`%5F`), HTML character references
 *   (`&#95;`, `&#x5F;`, `&amp;`), line breaks (base64 wrapped at 64 columns), and base64 itself (base64 of base64):
 *   each layer decodes one of each, so a nesting of them, up to that depth, is found.
 *
 * The text is decoded layer by layer, each decoded character remembering where it came from, so what is replaced is
 * the original spelling: JSON stays JSON after redaction.
 */

export const REDACTED = '[REDACTED]';

const MARKER = 'live_';
const TOKEN_LENGTH = 40;
/** Layers of escaping undone when looking for the key (JSON in a JSON string, percent-encoded in it). */
export const MAX_ESCAPE_LAYERS = 3;
/** Keys whose search strings are kept (a worker has one key, or a few across a rotation). */
const MAX_CACHED_KEYS = 16;
/** Padding characters taken with a base64 form (`=` twice at most). */
const MAX_PADDING = 2;

/** The strings to remove for a key: the key itself, then its token when the key has one. */
export function secretsOf(key: string | undefined): string[] {
  if (!key) return [];
  const at = key.lastIndexOf(MARKER);
  const token = at < 0 ? '' : key.slice(at + MARKER.length);
  return token.length === TOKEN_LENGTH && token !== key ? [key, token] : [key];
}

/** One string to look for; a base64 form may take the partly-determined characters and padding beside it. */
interface Needle {
  text: string;
  base64?: { left: boolean; right: boolean };
}

const needleCache = new Map<string, Needle[]>();

/** The key and its token raw, in hex (either case), and in base64 and base64url at each byte alignment. */
function needlesOf(key: string): Needle[] {
  const cached = needleCache.get(key);
  if (cached) return cached;
  const needles: Needle[] = [];
  const seen = new Set<string>();
  const add = (n: Needle) => {
    if (n.text.length === 0 || seen.has(n.text)) return;
    seen.add(n.text);
    needles.push(n);
  };
  for (const secret of secretsOf(key)) {
    const bytes = Buffer.from(secret, 'utf8');
    add({ text: secret });
    add({ text: bytes.toString('hex') });
    add({ text: bytes.toString('hex').toUpperCase() });
    for (let shift = 0; shift < 3; shift++) {
      // Only the characters that depend on the secret alone: those mixing in the bytes before or after are not known.
      const all = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64');
      const bits = 8 * (shift + bytes.length);
      const inner = all.slice(Math.ceil((8 * shift) / 6), Math.floor(bits / 6));
      const base64 = { left: shift !== 0, right: bits % 6 !== 0 };
      add({ text: inner, base64 });
      add({ text: inner.replace(/\+/g, '-').replace(/\//g, '_'), base64 });
    }
  }
  if (needleCache.size >= MAX_CACHED_KEYS) needleCache.clear();
  needleCache.set(key, needles);
  return needles;
}

/** Text with, for each of its UTF-16 units, the span of the original text it was decoded from. */
interface Layer {
  text: string;
  start: Int32Array;
  end: Int32Array;
}

/**
 * Replaces the key and its token in any text, in every form listed at the top of this file. Used for raw response
 * text and for decoded strings alike.
 */
export function redactSecret(text: string, key: string | undefined): string {
  if (!key || text.length === 0) return text;
  const needles = needlesOf(key);
  const spans: Array<[number, number]> = [];
  find(undefined, text, needles, spans);
  // Each layer's text is decoded both ways (escapes, base64 runs): a few texts at most, each searched once.
  let frontier: Layer[] = ESCAPED.test(text) || BASE64_RUN_START.test(text) ? [identity(text)] : [];
  for (let depth = 1; depth <= MAX_ESCAPE_LAYERS && frontier.length > 0; depth++) {
    const next: Layer[] = [];
    for (const from of frontier) {
      for (const decoded of [decodeLayer(from), base64Layer(from)]) {
        if (decoded.text === from.text) continue;
        find(decoded, text, needles, spans);
        next.push(decoded);
      }
    }
    frontier = next;
  }
  return spans.length === 0 ? text : replaceSpans(text, spans);
}

/**
 * Replaces the key and its token in raw response text, however JSON escapes (or percent-encoding) spell them; see
 * {@link redactSecret}.
 */
export function redactRawText(text: string, key: string | undefined): string {
  return redactSecret(text, key);
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

/** Adds the original-text spans of every needle found in `layer` (the original text itself when undefined). */
function find(layer: Layer | undefined, original: string, needles: readonly Needle[], spans: Array<[number, number]>) {
  const t = layer?.text ?? original;
  for (const n of needles) {
    for (let at = t.indexOf(n.text); at >= 0; at = t.indexOf(n.text, at + n.text.length)) {
      let first = at;
      let last = at + n.text.length - 1;
      if (n.base64) {
        if (n.base64.left && first > 0 && BASE64_CHAR.test(t.charAt(first - 1))) first -= 1;
        if (n.base64.right && last + 1 < t.length && BASE64_CHAR.test(t.charAt(last + 1))) last += 1;
        for (let pad = 0; pad < MAX_PADDING && t.charAt(last + 1) === '='; pad++) last += 1;
      }
      spans.push(layer ? [layer.start[first] ?? 0, layer.end[last] ?? original.length] : [first, last + 1]);
    }
  }
}

const BASE64_CHAR = /^[A-Za-z0-9+/_-]$/;
/** A text with something {@link decodeLayer} undoes. */
const ESCAPED = /[\\%&\r\n]/;
/** The shortest run of base64 decoded as text: 15 bytes, too short to hold the key. */
const BASE64_RUN = /[A-Za-z0-9+/_-]{20,}={0,2}/g;
const BASE64_RUN_START = /[A-Za-z0-9+/_-]{20}/;

/**
 * Each run of base64 (or base64url) that decodes to text (valid UTF-8, no control characters but white space)
 * replaced by that text, every character of which comes from the whole run; anything else is kept as it is.
 */
function base64Layer(from: Layer): Layer {
  const t = from.text;
  const parts: string[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const keep = (i: number, j: number) => {
    parts.push(t.slice(i, j));
    for (let k = i; k < j; k++) {
      starts.push(from.start[k] ?? 0);
      ends.push(from.end[k] ?? 0);
    }
  };
  let at = 0;
  for (const m of t.matchAll(BASE64_RUN)) {
    const decoded = Buffer.from(m[0].replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8');
    // eslint-disable-next-line no-control-regex -- control characters mean the run was bytes, not text
    if (decoded.length === 0 || decoded.includes('\ufffd') || /[\x00-\x08\x0e-\x1f\x7f]/.test(decoded)) continue;
    keep(at, m.index);
    const first = from.start[m.index] ?? 0;
    const last = from.end[m.index + m[0].length - 1] ?? 0;
    parts.push(decoded);
    for (let k = 0; k < decoded.length; k++) {
      starts.push(first);
      ends.push(last);
    }
    at = m.index + m[0].length;
  }
  if (at === 0) return from;
  keep(at, t.length);
  return { text: parts.join(''), start: Int32Array.from(starts), end: Int32Array.from(ends) };
}

function identity(text: string): Layer {
  const start = new Int32Array(text.length);
  const end = new Int32Array(text.length);
  for (let i = 0; i < text.length; i++) {
    start[i] = i;
    end[i] = i + 1;
  }
  return { text, start, end };
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/** Undoes one layer of JSON string escapes and percent-encoding; anything else is kept as it is. */
function decodeLayer(from: Layer): Layer {
  const t = from.text;
  // A decoded text is never longer than its spelling.
  const start = new Int32Array(t.length);
  const end = new Int32Array(t.length);
  const parts: string[] = [];
  let n = 0;
  const emit = (s: string, i: number, j: number) => {
    parts.push(s);
    for (let k = 0; k < s.length; k++, n++) {
      start[n] = from.start[i] ?? 0;
      end[n] = from.end[j] ?? 0;
    }
  };
  const escape = /[\\%&\r\n]/g;
  let i = 0;
  while (i < t.length) {
    escape.lastIndex = i;
    const at = escape.exec(t)?.index ?? t.length;
    if (at > i) {
      // A run with nothing to decode keeps its spans.
      parts.push(t.slice(i, at));
      start.set(from.start.subarray(i, at), n);
      end.set(from.end.subarray(i, at), n);
      n += at - i;
      i = at;
      if (i >= t.length) break;
    }
    const c = t.charAt(i);
    const decoded =
      c === '%'
        ? percentDecoded(t, i)
        : c === '&'
          ? htmlReference(t, i)
          : c === '\r' || c === '\n'
            ? { text: '', length: 1 }
            : jsonEscape(t, i);
    if (decoded) emit(decoded.text, i, i + decoded.length - 1);
    else emit(t.charAt(i), i, i);
    i += decoded?.length ?? 1;
  }
  return { text: parts.join(''), start: start.subarray(0, n), end: end.subarray(0, n) };
}

/** The character a JSON escape at `i` spells (`\uXXXX`, `\"`, `\n`, ...), and the length of its spelling. */
function jsonEscape(t: string, i: number): { text: string; length: number } | undefined {
  const next = t.charAt(i + 1);
  if (next === 'u' && isHex(t, i + 2, 4))
    return { text: String.fromCharCode(parseInt(t.slice(i + 2, i + 6), 16)), length: 6 };
  const simple = SIMPLE_ESCAPES[next];
  return simple === undefined ? undefined : { text: simple, length: 2 };
}

const NAMED_REFERENCES: Readonly<Record<string, string>> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** The character an HTML character reference at `i` spells (`&#95;`, `&#x5F;`, `&amp;`), and its length. */
function htmlReference(t: string, i: number): { text: string; length: number } | undefined {
  const m = /^&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-z]{2,4}));/.exec(t.slice(i, i + 12));
  if (!m) return undefined;
  const code = m[1] ? Number(m[1]) : m[2] ? parseInt(m[2], 16) : undefined;
  if (code !== undefined)
    return code <= 0x10ffff ? { text: String.fromCodePoint(code), length: m[0].length } : undefined;
  const named = NAMED_REFERENCES[m[3]!];
  return named === undefined ? undefined : { text: named, length: m[0].length };
}

/** The character one `%XX` (or a UTF-8 sequence of them) at `i` spells, and the length of its spelling. */
function percentDecoded(t: string, i: number): { text: string; length: number } | undefined {
  const byteAt = (k: number) =>
    t.charAt(i + 3 * k) === '%' && isHex(t, i + 3 * k + 1, 2)
      ? parseInt(t.slice(i + 3 * k + 1, i + 3 * k + 3), 16)
      : -1;
  const lead = byteAt(0);
  if (lead < 0) return undefined;
  if (lead < 0x80) return { text: String.fromCharCode(lead), length: 3 };
  const count = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (count === 0) return undefined;
  const bytes = [lead];
  for (let k = 1; k < count; k++) {
    const b = byteAt(k);
    if (b < 0x80 || b > 0xbf) return undefined;
    bytes.push(b);
  }
  const text = Buffer.from(bytes).toString('utf8');
  return text.includes('\ufffd') ? undefined : { text, length: 3 * count };
}

function isHex(t: string, at: number, n: number): boolean {
  return at + n <= t.length && /^[0-9a-fA-F]+$/.test(t.slice(at, at + n));
}

/** `text` with each span, merged where they overlap or touch, replaced by {@link REDACTED}. */
function replaceSpans(text: string, spans: Array<[number, number]>): string {
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const parts: string[] = [];
  let at = 0;
  let open: [number, number] | undefined;
  for (const [s, e] of spans) {
    if (open && s <= open[1]) {
      open[1] = Math.max(open[1], e);
      continue;
    }
    if (open) {
      parts.push(text.slice(at, open[0]), REDACTED);
      at = open[1];
    }
    open = [s, e];
  }
  if (open) {
    parts.push(text.slice(at, open[0]), REDACTED);
    at = open[1];
  }
  parts.push(text.slice(at));
  return parts.join('');
}
