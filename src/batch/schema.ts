import { z } from 'zod';
import { type CreationRequest, KeyOutcome, NO_MONEY_HELD, RowState, windowsIdProblem } from '../model';
import {
  Column,
  type ColumnIndex,
  type KnownColumn,
  MAX_EXTRA_VALUE_CHARS,
  RecordColumn,
  type UserColumn,
} from './header';
import { type BatchProblem, ProblemCode, preview } from './problems';

/** Submit-body limits (contract-defaults.md, "The submit body"). Lengths count Unicode code points, not UTF-16 units. */
export const FieldLimit = {
  promptMax: 4000,
  negativePromptMax: 2000,
  dimensionMin: 256,
  dimensionMax: 2048,
  dimensionStep: 64,
  seedMax: 2 ** 32 - 1,
  numImagesMin: 1,
  numImagesMax: 4,
  /** Not in the contract (model ids come from `GET /models`); a sanity bound so a stray cell is caught early. */
  modelMax: 256,
} as const;

/**
 * Row ids become part of a Temporal workflow id (`${batchId}/${rowId}`), of idempotency keys and of image file names,
 * so they are restricted to characters that are safe in all three, never contain the `/` separator and are never
 * only dots (`.` and `..` are not file names).
 */
export const ROW_ID_PATTERN = /^(?!\.+$)[A-Za-z0-9._:-]{1,128}$/;

/** One validated data row, ready to become a submit request. */
export interface BatchRow {
  /** The `id` cell, or `row-<n>` with n the 1-based data-row number. */
  rowId: string;
  /** Physical line where the row starts (1-based; the header is line 1). */
  line: number;
  request: CreationRequest;
  /**
   * The cells of the user's carried columns (`--carry`; at results time every column of theirs), exactly as written
   * (not trimmed), by column name. Read back from the file when results are written; the page-reading activity
   * leaves them out of what it returns, so they never reach workflow history. Absent when there are none.
   */
  columns?: Record<string, string>;
}

function codePoints(s: string, max: number): boolean {
  // Fast path: a string of at most `max` UTF-16 units has at most `max` code points.
  if (s.length <= max) return true;
  let n = 0;
  for (const _ of s) if (++n > max) return false;
  return true;
}

const wholeNumber = (field: string, min: number, max: number, step?: number) => {
  let num = z.number().min(min, `${field} must be at least ${min}`).max(max, `${field} must be at most ${max}`);
  if (step !== undefined) num = num.multipleOf(step, `${field} must be a multiple of ${step}`);
  return z
    .string()
    .regex(/^[0-9]{1,15}$/, `${field} must be a whole number written with digits only`)
    .transform(Number)
    .pipe(num);
};

// Control characters other than tab and line breaks are never meaningful in a model id.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Cells (already trimmed, empty optional cells left out) to a `CreationRequest`. Messages name the field. */
const RequestSchema = z.strictObject({
  prompt: z
    .string()
    .min(1, 'prompt is empty')
    .refine((s) => codePoints(s, FieldLimit.promptMax), `prompt is longer than ${FieldLimit.promptMax} characters`),
  model: z
    .string()
    .min(1, 'model is empty')
    .max(FieldLimit.modelMax, `model is longer than ${FieldLimit.modelMax} characters`)
    .refine((s) => !CONTROL.test(s), 'model contains control characters'),
  negative_prompt: z
    .string()
    .refine(
      (s) => codePoints(s, FieldLimit.negativePromptMax),
      `negative_prompt is longer than ${FieldLimit.negativePromptMax} characters`,
    )
    .optional(),
  width: wholeNumber('width', FieldLimit.dimensionMin, FieldLimit.dimensionMax, FieldLimit.dimensionStep).optional(),
  height: wholeNumber('height', FieldLimit.dimensionMin, FieldLimit.dimensionMax, FieldLimit.dimensionStep).optional(),
  seed: wholeNumber('seed', 0, FieldLimit.seedMax).optional(),
  num_images: wholeNumber('num_images', FieldLimit.numImagesMin, FieldLimit.numImagesMax).optional(),
});

const BODY_COLUMNS = [
  Column.Prompt,
  Column.Model,
  Column.NegativePrompt,
  Column.Width,
  Column.Height,
  Column.Seed,
  Column.NumImages,
] as const;

export interface RowInput {
  cells: readonly string[];
  /** Physical line where the record starts. */
  line: number;
  /** 1-based data-row number (blank lines and the header not counted), for the default `row-<n>` id. */
  rowNumber: number;
  /** Number of header columns: a record with another count is ragged. */
  width: number;
  index: ColumnIndex;
  defaultModel: string | undefined;
  /** The user's own columns (`--carry`, `--column`). @default none */
  own?: readonly UserColumn[];
}

export type RowResult =
  { ok: true; row: BatchRow } | { ok: false; rowId: string | undefined; problems: BatchProblem[] };

/**
 * Validates one record and reports every problem it has at once. Cells are trimmed (leading or trailing
 * spaces carry no meaning in a prompt or a number, and the service checks the prompt after trimming), and an
 * empty optional cell means "not set", so it never reaches the body.
 */
export function validateRow(input: RowInput): RowResult {
  const { cells, line, index } = input;
  const problems: BatchProblem[] = [];
  const cell = (column: KnownColumn): string | undefined => {
    const i = index.get(column);
    return i === undefined ? undefined : cells[i]?.trim();
  };

  let rowId: string | undefined = `row-${input.rowNumber}`;
  const idCell = cell(Column.Id);
  if (idCell !== undefined && idCell !== '' && cells.length === input.width) {
    const windows = ROW_ID_PATTERN.test(idCell) ? windowsIdProblem(idCell) : undefined;
    if (windows) {
      rowId = undefined;
      problems.push({
        code: ProblemCode.IdInvalid,
        line,
        field: Column.Id,
        message: `id ${preview(idCell)} ${windows}`,
      });
    } else if (ROW_ID_PATTERN.test(idCell)) {
      rowId = idCell;
    } else {
      rowId = undefined;
      problems.push({
        code: ProblemCode.IdInvalid,
        line,
        field: Column.Id,
        message: `id ${preview(idCell)} must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, not only dots`,
      });
    }
  }
  const withId = (p: BatchProblem): BatchProblem => (rowId === undefined ? p : { ...p, rowId });

  if (cells.length !== input.width) {
    // The cells cannot be matched to columns, so nothing else about the row can be trusted.
    return {
      ok: false,
      rowId: undefined,
      problems: [
        {
          code: ProblemCode.RaggedRow,
          line,
          message: `row has ${cells.length} field${cells.length === 1 ? '' : 's'}, the header has ${input.width}`,
        },
      ],
    };
  }

  const body: Record<string, string> = {};
  for (const column of BODY_COLUMNS) {
    const value = cell(column);
    if (value !== undefined && (value !== '' || column === Column.Prompt)) body[column] = value;
  }
  if (body.model === undefined) {
    if (input.defaultModel === undefined) {
      problems.push(
        withId({
          code: ProblemCode.ModelMissing,
          line,
          field: Column.Model,
          message: 'no model: the row has no "model" cell and the batch has no default model',
        }),
      );
      body.model = '-'; // reported above; keeps the schema from reporting it a second time
    } else {
      body.model = input.defaultModel;
    }
  }
  // Without a prompt column the header problem says it once; the row stays invalid without a per-row echo.
  const promptColumnMissing = body.prompt === undefined;
  if (promptColumnMissing) body.prompt = '-';

  const parsed = RequestSchema.safeParse(body);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const field = String(issue.path[0] ?? '');
      const raw = body[field];
      const got = raw === undefined || raw === '' ? '' : ` (got ${preview(raw)})`;
      problems.push(withId({ code: ProblemCode.FieldInvalid, line, field, message: `${issue.message}${got}` }));
    }
  }
  const refusal = mayBePaidProblem(cell(RecordColumn.State), cell(RecordColumn.KeyOutcomes), line);
  if (refusal) problems.push(withId(refusal));
  const carried: [string, string][] = [];
  const extra: [string, string][] = [];
  for (const own of input.own ?? []) {
    const raw = cells[own.index] ?? '';
    if (own.field === undefined) {
      carried.push([own.name, raw]);
      continue;
    }
    const value = raw.trim();
    if (value === '') continue;
    if (!codePoints(value, MAX_EXTRA_VALUE_CHARS)) {
      problems.push(
        withId({
          code: ProblemCode.FieldInvalid,
          line,
          field: own.name,
          message: `${own.name} (sent as ${own.field} by --column) is longer than ${MAX_EXTRA_VALUE_CHARS} characters`,
        }),
      );
      continue;
    }
    extra.push([own.field, value]);
  }
  if (problems.length > 0 || !parsed.success || rowId === undefined || promptColumnMissing) {
    return { ok: false, rowId, problems };
  }
  // Object.fromEntries defines own properties: a column named __proto__ stays a plain key.
  const request: CreationRequest =
    extra.length > 0 ? { ...parsed.data, extra: Object.fromEntries(extra) } : parsed.data;
  return {
    ok: true,
    row: { rowId, line, request, ...(carried.length > 0 ? { columns: Object.fromEntries(carried) } : {}) },
  };
}

/**
 * Row states that hold no money of their own: a row in one of them may go out again under a new key, provided no
 * key of it may hold money. `not_started` is a state of the result files only (no workflow for the row).
 */
export const STATES_HOLDING_NO_MONEY: ReadonlySet<string> = new Set([
  RowState.Failed,
  RowState.Cancelled,
  RowState.NotRun,
  'not_started',
]);

/** Row states that were, or may have been, paid for whatever their keys say (`in_flight`: results only). */
const STATES_MAY_BE_PAID: ReadonlySet<string> = new Set([
  RowState.Succeeded,
  RowState.Reused,
  RowState.ImagesUnsaved,
  RowState.Unknown,
  'in_flight',
]);

const KEY_OUTCOMES: ReadonlySet<string> = new Set(Object.values(KeyOutcome));

/**
 * Whether a row's record says it was, or may have been, paid for: its state is not one that holds no money, or a
 * key's outcome is not one of {@link NO_MONEY_HELD}. Such a row must never go out again under a new key. The batch
 * reader refuses it, and `imagebatch results` writes it to unresolved.csv, never to errors.csv.
 */
export function recordMayBePaid(state: string, keyOutcomes: readonly string[]): boolean {
  return !STATES_HOLDING_NO_MONEY.has(state) || keyOutcomes.some((o) => !NO_MONEY_HELD.has(o as KeyOutcome));
}

/**
 * The record cells of a row from errors.csv (or results.csv, unresolved.csv): a row that was, or may have been,
 * paid for is refused, whatever its `resubmittable` cell says, since under a new batch id (a new key) it could be
 * paid twice. A state or key outcome that cannot be read is refused too: it cannot be trusted in the paying
 * direction. Empty cells (a row added by hand) are fine.
 */
function mayBePaidProblem(
  stateCell: string | undefined,
  outcomesCell: string | undefined,
  line: number,
): BatchProblem | undefined {
  const state = (stateCell ?? '').toLowerCase();
  const outcomes = (outcomesCell ?? '').toLowerCase().split(/\s+/).filter(Boolean);
  if (state !== '' && !STATES_HOLDING_NO_MONEY.has(state) && !STATES_MAY_BE_PAID.has(state)) {
    return {
      code: ProblemCode.FieldInvalid,
      line,
      field: RecordColumn.State,
      message:
        `state ${preview(stateCell ?? '')} is not a row state: it cannot be read, so the row cannot be trusted not ` +
        'to have been paid; put back the state the result file gave it, or remove the row from this file',
    };
  }
  const unreadable = outcomes.find((o) => !KEY_OUTCOMES.has(o));
  if (unreadable !== undefined) {
    return {
      code: ProblemCode.FieldInvalid,
      line,
      field: RecordColumn.KeyOutcomes,
      message:
        `key_outcomes holds ${preview(unreadable)}, which is not a key outcome: it cannot be read, so the row ` +
        'cannot be trusted not to have been paid; put back the outcomes the result file gave it, or remove the row',
    };
  }
  const paidState = STATES_MAY_BE_PAID.has(state);
  if (!paidState && !recordMayBePaid(state || RowState.Failed, outcomes)) return undefined;
  const what = [state ? `state ${state}` : '', outcomes.length ? `key outcomes ${outcomes.join(' ')}` : '']
    .filter(Boolean)
    .join(', ');
  return {
    code: ProblemCode.FieldInvalid,
    line,
    field: paidState ? RecordColumn.State : RecordColumn.KeyOutcomes,
    message:
      `the row on line ${line} (${what}) may have been paid: resolve it with imagebatch reconcile, do not submit ` +
      'it again (under a new batch id it could be paid twice); remove its line from this file',
  };
}
