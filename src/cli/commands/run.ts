import path from 'node:path';
import { z } from 'zod';
import { batchAsks, defaultBatchId, prepareBatch, type BatchOptions, type PreparedBatch } from '../batches';
import type { LedgerStore } from '../../ledger';
import { withLedgerStore } from '../ledger-store';
import { columnOptions, columnSchema, userColumnsInput } from '../columns';
import { defineCommand } from '../command';
import { batchId, deadline, duration, flag, positiveInt, dollars } from '../options';
import { priceOptions, priceSchema, pricesInput } from '../prices';
import { terminalText } from '../terminal-text';
import { STOP_LOSS_HELP, stopLossSchema } from '../stop-loss-option';
import { fileNotes, writeRejected } from '../file-rows';
import { runBatch } from '../run-batch';

/** The name of a file run without `--batch-id`: without the extension, other characters as `-`. */
const nameOf = (file: string) =>
  path
    .basename(file)
    .replace(/\.[^.]*$/, '')
    .replace(/[^A-Za-z0-9._:-]/g, '-');

/** The options of `run`, checked. */
const runSchema = z.object({
  file: z.string(),
  batchId: batchId.optional(),
  model: z.string().optional(),
  out: z.string().optional(),
  newImages: flag,
  concurrency: positiveInt.optional(),
  maxAttempts: positiveInt,
  spendCap: dollars.optional(),
  ...priceSchema,
  ...columnSchema,
  deadline: deadline.optional(),
  maxPollWait: duration().optional(),
  stopLoss: stopLossSchema.optional(),
  skipInvalid: flag,
  follow: flag,
  detach: flag,
  allowPartial: flag,
  json: flag,
});

type RunOptions = z.output<typeof runSchema>;

/** `imagebatch run FILE`: start a batch, or attach to the running one with the same id; `--follow` to its end. */
export const runCommand = defineCommand({
  name: 'run',
  description: 'Start a batch (or attach to the running one): on TEMPORAL_ADDRESS, else locally',
  summary: 'Start a batch, or attach to the running one',
  args: [{ name: 'file', description: 'the batch file (CSV)' }],
  options: [
    {
      flags: '--batch-id <id>',
      description: 'default: the file name; the same id again resumes',
    },
    { flags: '--model <id>', description: 'model of rows that name none' },
    { flags: '--out <dir>', description: 'output folder (default: out/<batch id>)' },
    { flags: '--new-images', description: 'pay again for requests paid before (no reuse)' },
    { flags: '--concurrency <n>', description: 'rows in flight at most (default: found, up to 256)' },
    { flags: '--max-attempts <n>', description: 'attempts per row (after refunds)', default: '3' },
    { flags: '--spend-cap <usd>', description: 'the most the batch may spend (needs every price)' },
    ...priceOptions(),
    ...columnOptions(true),
    { flags: '--deadline <iso>', description: 'rows not started by then end as not_run (ISO 8601)' },
    { flags: '--max-poll-wait <duration>', description: 'longest wait for one creation (default 30m)' },
    { flags: '--stop-loss <settings>', description: STOP_LOSS_HELP },
    { flags: '--skip-invalid', description: 'run the valid rows; list the others in rejected.csv' },
    { flags: '--follow', description: 'show progress to the end (local mode: default)' },
    { flags: '--detach', description: 'local mode: start the batch and return' },
    { flags: '--allow-partial', description: 'exit 0 unless no row succeeded' },
    { flags: '--json', description: 'print the final progress as JSON' },
  ],
  schema: runSchema,
  async run(opts, context) {
    const { stderr, env } = context;
    const name = opts.batchId ?? nameOf(opts.file);
    // The file is read and checked before anything connects: a wrong file is said at once.
    const checked = await prepareBatch(await batchInputOf(opts, name));
    for (const note of fileNotes(checked.report)) stderr(`${opts.file}: ${terminalText(note)}\n`);
    // The store of what was paid: without it nothing starts.
    return withLedgerStore(env, async (ledger) => {
      const prepared = await identifyBatch(opts, name, checked, ledger, stderr);
      return runBatch(prepared, ledger, opts, context);
    });
  },
});

/** The batch's input as `run`'s options give it, under the name `name` (the batch id until the store says more). */
async function batchInputOf(opts: RunOptions, name: string): Promise<BatchOptions> {
  const columns = userColumnsInput(opts);
  const prices = await pricesInput(opts);
  return {
    batchId: name,
    file: opts.file,
    outDir: opts.out ?? path.join('out', name),
    ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
    maxAttempts: opts.maxAttempts,
    ...(opts.model ? { defaultModel: opts.model } : {}),
    ...(opts.spendCap === undefined ? {} : { spendCapUsd: opts.spendCap }),
    ...prices,
    ...columns,
    ...(opts.deadline ? { deadline: opts.deadline } : {}),
    ...(opts.maxPollWait === undefined ? {} : { maxPollWaitMs: opts.maxPollWait }),
    ...(opts.newImages ? { ledger: { newImages: true } } : {}),
    ...(opts.stopLoss ? { stopLoss: opts.stopLoss } : {}),
    ...(opts.skipInvalid ? { skipInvalid: true } : {}),
  };
}

/**
 * The checked batch under its id and output folder: a file's own name serves as its id while the store knows no
 * other content under it. With --skip-invalid, the rows left out are listed beside the results before it starts.
 */
async function identifyBatch(
  opts: RunOptions,
  name: string,
  checked: PreparedBatch,
  ledger: LedgerStore,
  stderr: (text: string) => void,
): Promise<PreparedBatch> {
  const batchId = opts.batchId ?? (await defaultBatchId(ledger, name, checked.fingerprint, batchAsks(checked.input)));
  if (batchId !== name) {
    stderr(`batch ${name} ran other content (another file or options): this one is batch ${batchId}\n`);
  }
  const outDir = opts.out ? checked.input.outDir : path.resolve('out', batchId);
  const prepared: PreparedBatch = { ...checked, input: { ...checked.input, batchId, outDir } };
  const rejected = opts.skipInvalid ? await writeRejected(outDir, checked.report) : undefined;
  if (rejected) stderr(`${terminalText(rejected)}\n`);
  return prepared;
}
