import { bodyPathProblem, REQUEST_SOURCES } from '../api/request-shape';
import type { UserColumns } from '../model';
import { isKnownColumn, MAX_USER_COLUMNS } from '../batch';
import { ErrorCode } from '../model/errors';
import type { OptionSpec } from './command';
import { OptionError } from './errors';
import { repeated } from './options';

/**
 * The columns of a batch file that the user owns, from `--carry <column>` and `--column <column>=<field>` (the same
 * options on run, validate and schedule create). Each value is checked as it is parsed; {@link userColumnsInput}
 * checks them together, in one place, before anything reads the file.
 */

/** `--carry` or `--column` cannot be used: names the option and what is wrong. Exit 2 (usage). */
export class ColumnOptionError extends OptionError {
  override readonly code = ErrorCode.ColumnOptionInvalid;
}

const REQUEST_FIELDS: ReadonlySet<string> = new Set(REQUEST_SOURCES);

function columnNameProblem(option: string, name: string): string | undefined {
  if (name === '') return `${option} needs a column name`;
  if (isKnownColumn(name)) {
    return REQUEST_FIELDS.has(name) || name === 'id'
      ? `"${name}" is one of imagebatch's request columns: it is always read, and sent as ${name}`
      : `"${name}" is one of the record columns of errors.csv: it is always read, never sent`;
  }
  return undefined;
}

/** One `--carry` value, added to those before it. */
export function parseCarryOption(value: string, previous: readonly string[] = []): string[] {
  const name = value.trim();
  const problem = columnNameProblem('--carry', name);
  if (problem) throw new ColumnOptionError('--carry', problem);
  if (previous.includes(name)) throw new ColumnOptionError('--carry', `"${name}" is given twice`);
  return [...previous, name];
}

/** One `--column <column>=<field>` value, added to those before it. */
export function parseColumnOption(
  value: string,
  previous: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const at = value.lastIndexOf('=');
  const name = value.slice(0, Math.max(at, 0)).trim();
  const field = value.slice(at + 1).trim();
  if (at < 1 || name === '' || field === '') {
    throw new ColumnOptionError('--column', `expected <column>=<request field>, got "${value}"`);
  }
  const problem = columnNameProblem('--column', name);
  if (problem) throw new ColumnOptionError('--column', problem);
  if (Object.hasOwn(previous, name)) throw new ColumnOptionError('--column', `the column "${name}" is given twice`);
  const pathProblem = bodyPathProblem(field);
  if (pathProblem) throw new ColumnOptionError('--column', `the field of ${name}: ${pathProblem}`);
  if (REQUEST_FIELDS.has(field)) {
    throw new ColumnOptionError(
      '--column',
      `${field} is a request field imagebatch fills from its own column: name the batch file's column ${field}`,
    );
  }
  const sameField = Object.entries(previous).find(([, f]) => f === field);
  if (sameField) {
    throw new ColumnOptionError('--column', `"${name}" and "${sameField[0]}" would both be sent as ${field}`);
  }
  return { ...previous, [name]: field };
}

/**
 * `--carry <column>` and `--column <column>=<field>`, both repeatable. Where every column outside the request is
 * carried by default (`run`, `validate`), `--carry` is accepted but left out of the help; `schedule create` still
 * needs it.
 */
export function columnOptions(carryByDefault: boolean): readonly OptionSpec[] {
  return [
    {
      flags: '--carry <column>',
      description: 'a column of yours kept, never sent (repeatable)',
      repeatable: true,
      hidden: carryByDefault,
    },
    {
      flags: '--column <column=field>',
      description: 'a column of yours sent as <field> (repeatable)',
      repeatable: true,
    },
  ];
}

/** The schema of {@link columnOptions}: each value checked as it is read ({@link userColumnsInput}: together). */
export const columnSchema = { carry: repeated(parseCarryOption), column: repeated(parseColumnOption) };

export interface ColumnCliOptions {
  carry?: string[];
  column?: Record<string, string>;
}

/**
 * The batch input's `userColumns`, when the user gave any: the options checked together (a column given to both,
 * too many). Throws {@link ColumnOptionError}.
 */
export function userColumnsInput(opts: ColumnCliOptions): { userColumns?: UserColumns } {
  const carry = opts.carry ?? [];
  const send = opts.column ?? {};
  const both = carry.find((c) => Object.hasOwn(send, c));
  if (both !== undefined) {
    throw new ColumnOptionError(
      '--carry',
      `"${both}" is also given to --column: a sent column comes back in the results too, give it once`,
    );
  }
  if (carry.length > MAX_USER_COLUMNS) {
    throw new ColumnOptionError('--carry', `at most ${MAX_USER_COLUMNS} columns (got ${carry.length})`);
  }
  if (Object.keys(send).length > MAX_USER_COLUMNS) {
    throw new ColumnOptionError('--column', `at most ${MAX_USER_COLUMNS} columns (got ${Object.keys(send).length})`);
  }
  if (carry.length === 0 && Object.keys(send).length === 0) return {};
  return {
    userColumns: { ...(carry.length ? { carry } : {}), ...(Object.keys(send).length ? { send } : {}) },
  };
}
