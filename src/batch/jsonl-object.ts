/** One line of a JSON Lines file as a flat object: its keys and values as written. */

/** A key of a line's object and its value's text as written, with what kind of value it is. */
export type FlatValue = { key: string; kind: 'string' | 'number' | 'literal' | 'nested'; raw: string };

/**
 * One line as a flat JSON object: its keys and values in order, each value's text as written (a number keeps its
 * digits). JSON.parse checks the syntax first, so the walk below only has valid JSON to read.
 */
export function parseFlatObject(text: string): { values: FlatValue[] } | { message: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { message: `is not valid JSON (${(err as Error).message})` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { message: 'is not a JSON object ({"prompt": "..."})' };
  }
  const values: FlatValue[] = [];
  let i = skipSpace(text, skipSpace(text, 0) + 1);
  while (text[i] !== '}') {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const first = text[start];
    let end: number;
    let kind: FlatValue['kind'];
    if (first === '"') {
      end = stringEnd(text, start);
      kind = 'string';
    } else if (first === '{' || first === '[') {
      end = nestedEnd(text, start);
      kind = 'nested';
    } else {
      end = start;
      while (end < text.length && !/[\s,}]/.test(text[end]!)) end += 1;
      kind = /^[-0-9]/.test(first ?? '') ? 'number' : 'literal';
    }
    values.push({ key, kind, raw: text.slice(start, end) });
    i = skipSpace(text, end);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return { values };
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i]!)) i += 1;
  return i;
}

/** Index just past the JSON string starting at `i` (a quote). */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
  return j + 1;
}

/** Index just past the object or array starting at `i`. */
function nestedEnd(text: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < text.length) {
    const ch = text[j]!;
    if (ch === '"') {
      j = stringEnd(text, j);
      continue;
    }
    if (ch === '{' || ch === '[') depth += 1;
    else if (ch === '}' || ch === ']') depth -= 1;
    j += 1;
    if (depth === 0) break;
  }
  return j;
}
