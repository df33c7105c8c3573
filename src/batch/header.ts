import type { UserColumns } from '../model';
import { type BatchProblem, ProblemCode, preview } from './problems';

/** The request columns of a batch file. Only these ever reach a request body. */
export const Column = {
  Id: 'id',
  Prompt: 'prompt',
  Model: 'model',
  NegativePrompt: 'negative_prompt',
  Width: 'width',
  Height: 'height',
  Seed: 'seed',
  NumImages: 'num_images',
} as const;
export type Column = (typeof Column)[keyof typeof Column];

/**
 * The record columns `imagebatch results` writes into errors.csv after the batch-file columns, so that errors.csv
 * can be run again as it is. They are read, never sent: a row whose `state` or `key_outcomes` says it may have been
 * paid is refused (results.csv and unresolved.csv carry them too, so their rows are refused the same way).
 */
export const RecordColumn = {
  State: 'state',
  /** errors.csv only: what to do with the row (`submit_again`, `revise_prompt`, `fix_row`); never checked. */
  Advice: 'advice',
  Resubmittable: 'resubmittable',
  Error: 'error',
  IdempotencyKeys: 'idempotency_keys',
  KeyOutcomes: 'key_outcomes',
  CreationIds: 'creation_ids',
  ChargedUsd: 'charged_usd',
  RefundedUsd: 'refunded_usd',
  NetUsd: 'net_usd',
  /** `false` when a key of the row may hold money whose price nobody showed: its figures are empty, never 0. */
  PriceKnown: 'price_known',
  /** errors.csv only: the batch the row ran in (`run` refuses the file while that batch is still open). */
  BatchId: 'batch_id',
} as const;
export type RecordColumn = (typeof RecordColumn)[keyof typeof RecordColumn];

/** A column a batch file may have: one of the request, or one of errors.csv's record. */
export type KnownColumn = Column | RecordColumn;

const REQUEST_KNOWN: ReadonlySet<string> = new Set<string>(Object.values(Column));
const KNOWN: ReadonlySet<string> = new Set<string>([...Object.values(Column), ...Object.values(RecordColumn)]);

/** Where each known column sits in a record; absent columns are missing from the map. */
export type ColumnIndex = ReadonlyMap<KnownColumn, number>;

/** One column the user owns, where it sits, and the body field it is sent under (absent: carried). */
export interface UserColumn {
  name: string;
  index: number;
  field?: string;
}

/** Most `--carry` and `--column` options of a batch, each. */
export const MAX_USER_COLUMNS = 32;
/** Longest value of a `--column` cell (code points): it is sent, so it travels in the row's workflow input. */
export const MAX_EXTRA_VALUE_CHARS = 4000;

/**
 * A header name as it is matched against ours: without surrounding spaces, in lower case, inner runs of spaces and
 * hyphens as `_` (`Prompt`, ` PROMPT `, `Negative Prompt` and `negative-prompt` are all ours).
 */
export function normalizeColumn(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[\s-]+/g, '_');
}

/** The column of ours a header name stands for, if it is one (see {@link normalizeColumn}). */
export function knownColumnOf(name: string): KnownColumn | undefined {
  const normalized = normalizeColumn(name);
  return KNOWN.has(normalized) ? (normalized as KnownColumn) : undefined;
}

/** Whether a header name is one of ours (request or record column), in any case. */
export function isKnownColumn(name: string): boolean {
  return knownColumnOf(name) !== undefined;
}

/** The columns of `header` that the user owns under `user`, in header order (unknown, unowned ones left out). */
export function userColumnsOf(header: readonly string[], user: UserColumns | undefined): UserColumn[] {
  if (!user) return [];
  const carry = new Set(user.carry ?? []);
  const send = new Map(Object.entries(user.send ?? {}));
  const out: UserColumn[] = [];
  const seen = new Set<string>();
  header.forEach((name, index) => {
    if (name === '' || isKnownColumn(name) || seen.has(name)) return;
    seen.add(name);
    const field = send.get(name);
    if (field !== undefined) out.push({ name, index, field });
    else if (carry.has(name) || user.readAll) out.push({ name, index });
  });
  return out;
}

export interface ParsedHeader {
  /** The header cells as written (trimmed), kept in the page cursor so later pages need not re-read line 1. */
  columns: string[];
  index: ColumnIndex;
  /** The columns the user owns (`--carry`, `--column`), in header order. */
  own: UserColumn[];
  /** The columns carried: those of `--carry`, then (with `carryOthers`) every other one of the user's. */
  carried: string[];
  problems: BatchProblem[];
}

export interface HeaderOptions {
  /**
   * Carry every column that is neither ours nor sent (`--column`), rather than refusing it: what the CLI does.
   * @default false
   */
  carryOthers?: boolean;
}

/**
 * Reads the header row. Unknown columns are errors, not warnings: the service rejects unknown body fields,
 * and a misspelt optional column (`Width`, `neg_prompt`) silently dropped would spend money on images made
 * without the settings the user asked for. The fix is one edit of line 1, so refusing is cheap.
 */
export function parseHeader(
  cells: readonly string[],
  line: number,
  given?: UserColumns,
  options: HeaderOptions = {},
): ParsedHeader {
  const columns = cells.map((c) => c.trim());
  const user = options.carryOthers ? carryingOthers(columns, given) : given;
  const index = new Map<KnownColumn, number>();
  const problems: BatchProblem[] = [];
  const seen = new Map<string, number>();
  const owned = new Set([...(user?.carry ?? []), ...Object.keys(user?.send ?? {})]);
  columns.forEach((name, i) => {
    const position = `column ${i + 1}`;
    if (name === '') {
      problems.push({
        code: ProblemCode.HeaderEmptyColumn,
        line,
        message: `header ${position} has no name (a trailing comma?)`,
      });
      return;
    }
    const earlier = seen.get(name);
    if (earlier !== undefined) {
      problems.push({
        code: ProblemCode.HeaderDuplicateColumn,
        line,
        field: name,
        message: `header column ${preview(name)} appears twice (columns ${earlier + 1} and ${i + 1})`,
      });
      return;
    }
    seen.set(name, i);
    const known = knownColumnOf(name);
    if (known !== undefined) {
      const first = index.get(known);
      if (first !== undefined) {
        problems.push({
          code: ProblemCode.HeaderDuplicateColumn,
          line,
          field: known,
          message:
            `header columns ${preview(columns[first] ?? '')} (column ${first + 1}) and ${preview(name)} ` +
            `(column ${i + 1}) are both the column ${known}`,
        });
        return;
      }
      index.set(known, i);
      return;
    }
    if (owned.has(name) || user?.readAll) return;
    problems.push({
      code: ProblemCode.HeaderUnknownColumn,
      line,
      field: name,
      message: unknownColumnMessage(name, i + 1),
    });
  });
  for (const name of owned) {
    if (seen.has(name)) continue;
    const option = user?.send?.[name] === undefined ? `--carry ${name}` : `--column ${name}=${user.send[name]}`;
    problems.push({
      code: ProblemCode.HeaderOptionColumnMissing,
      line,
      field: name,
      message: `${option} names the column ${preview(name)}, which the header does not have`,
    });
  }
  if (!index.has(Column.Prompt)) {
    problems.push({
      code: ProblemCode.HeaderMissingPrompt,
      line,
      field: Column.Prompt,
      message: `the header has no "prompt" column (found: ${columns.map((c) => preview(c)).join(', ') || 'nothing'})`,
    });
  }
  const own = userColumnsOf(columns, user);
  if (options.carryOthers && own.length > MAX_USER_COLUMNS) {
    problems.push({
      code: ProblemCode.HeaderTooManyColumns,
      line,
      message:
        `the header has ${own.length} columns of your own (${own.map((c) => preview(c.name)).join(', ')}); at ` +
        `most ${MAX_USER_COLUMNS} are carried into the results: remove some`,
    });
  }
  return { columns, index, own, carried: [...(user?.carry ?? [])], problems };
}

/** `user` with every column of `columns` that is neither ours nor given to an option added to its carried ones. */
function carryingOthers(columns: readonly string[], user: UserColumns | undefined): UserColumns {
  const carry = [...(user?.carry ?? [])];
  const taken = new Set([...carry, ...Object.keys(user?.send ?? {})]);
  for (const name of columns) {
    if (name === '' || isKnownColumn(name) || taken.has(name)) continue;
    taken.add(name);
    carry.push(name);
  }
  return { ...user, carry };
}

function unknownColumnMessage(name: string, position: number): string {
  const known = [...REQUEST_KNOWN].join(', ');
  const record = Object.values(RecordColumn).join(', ');
  if (name.includes('\u0000')) {
    return `header column ${preview(name)} contains NUL characters: the file looks like UTF-16; save it as UTF-8`;
  }
  return (
    `unknown column ${preview(name)} (header column ${position}): the service rejects unknown fields; ` +
    `allowed columns are ${known} (and errors.csv's ${record}, which are never sent); to keep a column of your own ` +
    `give --carry ${preview(name)} (carried into the results, never sent) or ` +
    `--column ${preview(name)}=<field> (sent in the request under <field>)`
  );
}

/** Rebuilds the column index from a cursor's stored header (already validated on the first page). */
export function indexColumns(columns: readonly string[]): ColumnIndex {
  const index = new Map<KnownColumn, number>();
  columns.forEach((name, i) => {
    const known = knownColumnOf(name);
    if (known !== undefined && !index.has(known)) index.set(known, i);
  });
  return index;
}
