import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { UserColumns } from '../../model';
import { validateBatchFile, type BatchReport } from '../../batch';
import { z } from 'zod';
import { connectClient } from '../client';
import { columnOptions, columnSchema, userColumnsInput } from '../columns';
import { defineCommand } from '../command';
import { ExitCode } from '../errors';
import { flag } from '../options';
import {
  estimateOf,
  priceModels,
  priceOptions,
  priceSchema,
  readCatalog,
  userPrices,
  type ModelPrice,
} from '../prices';
import { terminalText } from '../terminal-text';
import { withLedgerStore } from '../ledger-store';
import { sayPaidBefore } from '../paid-before';
import { fileNotes, SKIP_INVALID_MAX_PROBLEMS, skipRefusal, withCarried } from '../file-rows';
import { keyAtHand, readCatalogHere } from '../direct-catalog';
import { ModelUnavailableError, NO_MODEL_IDS } from '../model-check';
import type { ModelInfo } from '../../model';

export interface ValidateOptions {
  file: string;
  /** Model of rows that name none. */
  defaultModel?: string;
  /** Columns the user owns (`--carry`, `--column`). @default none */
  userColumns?: UserColumns;
  /**
   * Check the models against the account's catalog and estimate the cost, through a running worker (it holds
   * the API key). Without it, only the file is checked.
   */
  catalog?: { client: Client; taskQueue: string } | CatalogReader;
  /**
   * Prices per image the user gives (`--price`, `--prices`), for models the catalog shows no price for.
   * @default none
   */
  prices?: Record<string, number>;
}

/**
 * The catalog read another way than through a worker (`validate` with the key in its own environment): `implicit`
 * when nobody asked for it, so that a catalog that could not be read does not fail the file.
 */
export interface CatalogReader {
  read: () => Promise<{ models: ModelInfo[] } | { problem: string }>;
  implicit?: boolean;
}

export interface ValidateResult {
  report: BatchReport;
  /** Present when the catalog was checked: each model with its price and where it comes from, or none. */
  models?: ModelPrice[];
  /** USD if every row succeeds at its first attempt, for the models whose price is known. */
  estimatedCostUsd?: number;
  /** Models whose price is not known: the estimate leaves them out (it is then a lower bound). */
  unpricedModels?: string[];
  /** Why the catalog could not be read, when it could not. */
  catalogProblem?: string;
  /** The account's models, when a model of the file is not among them. */
  accountModels?: string[];
  /** False when the file has problems, uses a model the account lacks, or the catalog could not be read. */
  ok: boolean;
}

/** `imagebatch validate FILE`: every problem of the file with its line; nothing is started or charged. */
export async function validate(options: ValidateOptions): Promise<ValidateResult> {
  return checkReport(await fileReport(options), options);
}

/**
 * The file's report, read before anything connects. As `run` reads it: every column neither ours nor sent is carried,
 * and with `skipInvalid` every problem is kept (each would be a line of rejected.csv).
 */
function fileReport(
  options: Pick<ValidateOptions, 'file' | 'defaultModel' | 'userColumns'> & { skipInvalid?: boolean },
): Promise<BatchReport> {
  return validateBatchFile(options.file, {
    ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}),
    ...(options.userColumns ? { userColumns: options.userColumns } : {}),
    carryOthers: true,
    ...(options.skipInvalid ? { maxProblems: SKIP_INVALID_MAX_PROBLEMS } : {}),
  });
}

/** The result of a file's report: with `catalog`, its models against the account's catalog, and the estimate. */
async function checkReport(
  report: BatchReport,
  options: Pick<ValidateOptions, 'catalog' | 'prices'>,
  fileOk = report.ok,
): Promise<ValidateResult> {
  const reader = options.catalog;
  if (!reader) return { report, ok: fileOk };
  const read = 'read' in reader ? await reader.read() : await readCatalog(reader.client, reader.taskQueue);
  const catalog = 'models' in read && read.models.length === 0 ? { problem: NO_MODEL_IDS } : read;
  if ('problem' in catalog) {
    return { report, catalogProblem: catalog.problem, ok: 'read' in reader && reader.implicit === true && fileOk };
  }
  const models = priceModels(report.models, catalog.models, options.prices ?? {});
  const { knownUsd, unknownModels } = estimateOf(models);
  const available = models.every((m) => m.available !== false);
  return {
    report,
    models,
    estimatedCostUsd: knownUsd,
    ...(unknownModels.length > 0 ? { unpricedModels: unknownModels } : {}),
    ...(available ? {} : { accountModels: catalog.models.map((m) => m.id) }),
    ok: fileOk && available,
  };
}

/** One line per model: rows, images, price and its source, or that it is unknown or not available. */
export function modelLines(res: ValidateResult): string[] {
  return (res.models ?? []).map((m) => {
    const price =
      m.available === false
        ? 'NOT AVAILABLE to this account'
        : m.priceUsd === undefined
          ? 'price unknown (the catalog shows none; give one with --price)'
          : `$${m.priceUsd} per image (${m.source === 'catalog' ? 'catalog' : 'your --price'})`;
    return `${m.model}: ${m.rows} rows, ${m.images} images, ${price}`;
  });
}

/** The estimate, saying what it leaves out. */
export function estimateLine(res: ValidateResult): string | undefined {
  if (res.estimatedCostUsd === undefined) return undefined;
  const unknown = res.unpricedModels ?? [];
  return unknown.length === 0
    ? `estimated cost: $${res.estimatedCostUsd.toFixed(2)}`
    : `estimated cost: at least $${res.estimatedCostUsd.toFixed(2)}, plus the rows of ${unknown.join(', ')} (price unknown)`;
}

/**
 * `imagebatch validate FILE`: exit 3 when the file has problems, or a model is not available (checked with
 * `--catalog` through a worker, or here when the key is in this environment and no Temporal address is set).
 */
export const validateCommand = defineCommand({
  name: 'validate',
  description: 'Check a batch file: every problem with its line number; nothing is started or charged',
  summary: 'Check a batch file; nothing is started or charged',
  args: [{ name: 'file', description: 'the batch file (CSV)' }],
  options: [
    { flags: '--model <id>', description: 'model of rows that name none' },
    {
      flags: '--catalog',
      description: "also check models against the account's catalog and estimate the cost (asks a running worker)",
    },
    ...priceOptions(),
    ...columnOptions(true),
    {
      flags: '--skip-invalid',
      description: 'say what run --skip-invalid would do: run the valid rows, list the others',
    },
    { flags: '--json', description: 'print the report as JSON' },
  ],
  schema: z.object({
    file: z.string(),
    model: z.string().optional(),
    catalog: flag,
    ...priceSchema,
    ...columnSchema,
    skipInvalid: flag,
    json: flag,
  }),
  async run(opts, { stdout, stderr, env }) {
    const { file } = opts;
    const prices = await userPrices(opts);
    const columns = userColumnsInput(opts);
    // The file first: with --catalog, a missing file is said before anything connects.
    const fileChecked = await fileReport({
      file,
      ...columns,
      ...(opts.model ? { defaultModel: opts.model } : {}),
      skipInvalid: opts.skipInvalid,
    });
    const carried = withCarried(columns.userColumns, fileChecked);
    // --skip-invalid: a file whose problems are all rows' own is fine to run (its valid rows); why not, else.
    const refusal = opts.skipInvalid && !fileChecked.ok ? skipRefusal(fileChecked) : '';
    const fileOk = fileChecked.ok || refusal === undefined;
    let paidBefore: string | undefined;
    const res = opts.catalog
      ? await (async () => {
          const storeId = await withLedgerStore(env, async (store) => store.id);
          const { client, config, close } = await connectClient(env, {
            local: 'worker',
            log: (line) => stderr(`${line}\n`),
          });
          try {
            const checked = await checkReport(
              fileChecked,
              { prices, catalog: { client, taskQueue: config.taskQueue } },
              fileOk,
            );
            // What a run of it would pay now: requests paid before are reused.
            if (fileChecked.ok) {
              const input = {
                file: path.resolve(file),
                storeId,
                ...(carried ? { userColumns: carried } : {}),
                ...(opts.model ? { defaultModel: opts.model } : {}),
              };
              paidBefore = await sayPaidBefore(client, config.taskQueue, input, prices);
            }
            return checked;
          } finally {
            await close();
          }
        })()
      : keyAtHand(env)
        ? await checkReport(
            fileChecked,
            { prices, catalog: { read: () => readCatalogHere(env), implicit: true } },
            fileOk,
          )
        : await checkReport(fileChecked, { prices }, fileOk);
    const { report } = res;
    if (opts.json) stdout(`${JSON.stringify(res, null, 2)}\n`);
    else {
      for (const note of fileNotes(report)) stderr(`${file}: ${terminalText(note)}\n`);
      for (const p of report.problems) stderr(`${file}:${p.line}${p.field ? ` (${p.field})` : ''}: ${p.message}\n`);
      if (report.problemsDropped > 0) stderr(`${file}: ... and ${report.problemsDropped} more problems\n`);
      if (refusal === undefined) {
        stderr(`${file}: run --skip-invalid would run the ${report.validRows} valid rows and list the others\n`);
      } else if (refusal) {
        stderr(`${file}: run --skip-invalid would start nothing either: ${terminalText(refusal)}\n`);
      }
      if (res.catalogProblem && !opts.catalog) {
        stderr(`models not checked against the account's catalog: ${terminalText(res.catalogProblem)}\n`);
      } else if (res.catalogProblem) stderr(`imagebatch: the catalog could not be read: ${res.catalogProblem}\n`);
      const models = res.models
        ? modelLines(res).map(terminalText)
        : Object.entries(report.models).map(([m, u]) => `${m}: ${u.rows} rows, ${u.images} images`);
      const line = estimateLine(res);
      const estimate = `${line === undefined ? '' : `\n${line}`}${paidBefore ? `\n${terminalText(paidBefore)}` : ''}`;
      stdout(
        `${report.rows} rows, ${report.validRows} valid, ${report.problemCount} problem(s)` +
          `${models.length ? `\n${models.join('\n')}` : ''}${estimate}\n`,
      );
      if (res.accountModels) {
        // One line, as `run` says it: the models the account lacks, their rows, and the account's models.
        const missing = (res.models ?? []).filter((m) => m.available === false);
        const catalog = res.accountModels.map((id) => ({ id }));
        stderr(`imagebatch: ${terminalText(new ModelUnavailableError(missing, catalog).message)}\n`);
      }
    }
    return res.ok ? ExitCode.Ok : ExitCode.InvalidInput;
  },
});
