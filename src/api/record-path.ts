/**
 * Paths into a JSON record: where a setting says a value is (`IMAGEGEN_COST_FIELDS`, `IMAGEGEN_IMAGE_FIELDS`...).
 *
 * The grammar, all of it:
 *
 * ```
 * path    = segment *( "." segment )        cost_usd   billing.amount   images[].url   output[0]
 * segment = name *( "[" [ index ] "]" )
 * name    = 1*( A-Z / a-z / 0-9 / "_" / "$" / "-" )
 * index   = 1*6DIGIT
 * ```
 *
 * A name reads that field of an object (its own field: never one inherited, such as `__proto__`'s); `[n]` reads
 * element n of an array (from 0); `[]` reads every element of an array, in order. A step that does not fit the value
 * it meets (a name on an array, an index on an object, a field that is absent) finds nothing. A path is at most
 * {@link MAX_RECORD_PATH_LENGTH} characters. Every value found comes with its concrete location, the path with each
 * `[]` replaced by the element's index: `images[].url` finds `images[0].url`, `images[1].url`...
 */

/** One step of a path: a field, an element, or every element. */
export type PathStep = { kind: 'name'; name: string } | { kind: 'index'; index: number } | { kind: 'each' };

/** A path that {@link parseRecordPath} accepted. */
export interface RecordPath {
  /** The path as written. */
  readonly text: string;
  readonly steps: readonly PathStep[];
}

/** A value found in a record, and where. */
export interface FoundValue {
  value: unknown;
  /** The concrete location: `images[1].url`, `result.files[0].href`. */
  at: string;
  /** The object or array that holds the value (the record itself for a one-name path). */
  holder: object;
}

/** The longest path accepted. */
export const MAX_RECORD_PATH_LENGTH = 256;

/** What a path may be, for error messages. */
export const RECORD_PATH_SYNTAX =
  'a field name or a dotted path such as billing.amount, with [n] for element n of an array and [] for every element (images[].url)';

/** A field name: letters, digits, `_`, `$` and `-` (one source for every path the settings take). */
const NAME_CHARS = '[A-Za-z0-9_$-]+';
const NAME = new RegExp(`^${NAME_CHARS}$`);
const SEGMENT = new RegExp(`^(${NAME_CHARS})((?:\\[\\d{0,6}\\])*)$`);
/** A field name or a dotted path of names, without brackets: where a request body field goes (`input.text`). */
export const DOTTED_NAMES = new RegExp(`^${NAME_CHARS}(\\.${NAME_CHARS})*$`);
const BRACKETS = /\[(\d{0,6})\]/g;

/** Parses `text` by the grammar above; a string describing the problem when it does not fit. */
export function parseRecordPath(text: string): RecordPath | string {
  if (text.length === 0) return 'is empty';
  if (text.length > MAX_RECORD_PATH_LENGTH) return `is longer than ${MAX_RECORD_PATH_LENGTH} characters`;
  const steps: PathStep[] = [];
  for (const segment of text.split('.')) {
    if (segment === '') return 'has an empty field name (two dots, or a dot at an end)';
    const m = SEGMENT.exec(segment);
    if (!m) return `has a step that is not a name followed by [n] or [] (names are letters, digits, _, $ and -)`;
    steps.push({ kind: 'name', name: m[1] ?? '' });
    for (const b of (m[2] ?? '').matchAll(BRACKETS)) {
      const digits = b[1] ?? '';
      steps.push(digits === '' ? { kind: 'each' } : { kind: 'index', index: Number(digits) });
    }
  }
  return { text, steps };
}

/** Why `text` is not a path, or undefined when it is one: for configuration errors. */
export function recordPathProblem(text: string): string | undefined {
  const parsed = parseRecordPath(text);
  return typeof parsed === 'string' ? parsed : undefined;
}

/**
 * Every value at `path` in `record`, in document order, each with its concrete location; lazily, so a caller that
 * wants a few stops early. A path that does not fit the grammar finds nothing (configuration validates paths with
 * {@link recordPathProblem} first). `base` is prefixed to each location.
 */
export function* valuesAt(record: unknown, path: string | RecordPath, base = ''): Generator<FoundValue> {
  const parsed = typeof path === 'string' ? parseRecordPath(path) : path;
  if (typeof parsed === 'string') return;
  yield* walk(record, parsed.steps, 0, base, undefined);
}

/** The first value at `path` in `record` (see {@link valuesAt}), or undefined when there is none. */
export function firstValueAt(record: unknown, path: string | RecordPath): FoundValue | undefined {
  for (const found of valuesAt(record, path)) return found;
  return undefined;
}

function* walk(
  at: unknown,
  steps: readonly PathStep[],
  i: number,
  location: string,
  holder: object | undefined,
): Generator<FoundValue> {
  const step = steps[i];
  if (step === undefined) {
    if (holder !== undefined) yield { value: at, at: location, holder };
    return;
  }
  switch (step.kind) {
    case 'name':
      if (at === null || typeof at !== 'object' || Array.isArray(at)) return;
      if (!Object.prototype.hasOwnProperty.call(at, step.name)) return;
      yield* walk((at as Record<string, unknown>)[step.name], steps, i + 1, childLocation(location, step.name), at);
      return;
    case 'index':
      if (!Array.isArray(at) || step.index >= at.length) return;
      yield* walk((at as unknown[])[step.index], steps, i + 1, childLocation(location, step.index), at);
      return;
    case 'each':
      if (!Array.isArray(at)) return;
      for (let n = 0; n < at.length; n++)
        yield* walk((at as unknown[])[n], steps, i + 1, childLocation(location, n), at);
      return;
  }
}

/** Longest field name shown as it is in a location; a longer one is cut. */
const MAX_SHOWN_NAME = 40;

/**
 * The location of a field or an element under `location`: `a.b`, `a[3]`. A field name that the grammar does not
 * allow (or a long one) is shown quoted and cut to a few dozen characters, `a["odd name"]`, so that a location
 * stays short whatever the record's keys are.
 */
export function childLocation(location: string, key: string | number): string {
  if (typeof key === 'number') return `${location}[${key}]`;
  if (NAME.test(key) && key.length <= MAX_SHOWN_NAME) return location === '' ? key : `${location}.${key}`;
  const shown = key.length > MAX_SHOWN_NAME ? `${key.slice(0, MAX_SHOWN_NAME)}...` : key;
  return `${location}[${JSON.stringify(shown)}]`;
}
