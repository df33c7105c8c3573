import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { z } from 'zod';
import type { LedgerStore } from '../../ledger';
import { importOutputFolder, withLedgerStore } from '../ledger-store';
import { collectResults, writeResults, type WrittenResults } from '../../results';
import { batchWorkflowId } from '../../model';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { batchId, flag } from '../options';
import { resultFilesSummary } from './demo';

export interface ResultsOptions {
  client: Client;
  batchId: string;
  /** The ledger store: it knows the batch's file and every row, also once Temporal has forgotten them. */
  ledger: LedgerStore;
  /**
   * Where to write; for a batch of an earlier version that Temporal no longer knows, its output folder (whose
   * ledger.jsonl is taken into the store).
   * @default the batch's own output folder
   */
  outDir?: string;
  /** The worker's settings (for the prints of an earlier version's ledger.jsonl). @default the process's environment */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * `imagebatch results BATCH`: results.csv, results.jsonl, errors.csv and index.html, from the row workflows and the
 * ledger store. The batch file and output folder come from the batch's memo, or once Temporal has forgotten the
 * batch, from its last start in the store. Works while it runs.
 */
export async function results(options: ResultsOptions): Promise<WrittenResults> {
  const { client, batchId, ledger } = options;
  const described = await describeBatch(client, batchId);
  const memo = described?.memo;
  let source: { file: string; outDir: string; defaultModel?: string | undefined };
  if (memo) {
    if (!memo.file || !memo.outDir) throw new Error(`batch ${batchId} has no file recorded in its memo`);
    source = { file: memo.file, outDir: memo.outDir, defaultModel: memo.defaultModel || undefined };
  } else {
    if (options.outDir) await importOutputFolder(ledger, options.outDir, options.env);
    const started = (await ledger.batches(batchId)).at(-1);
    if (!started) {
      throw new Error(
        `batch ${batchId} is not known to Temporal (retention passed?) nor to the ledger store ${ledger.location}: ` +
          'check IMAGEBATCH_LEDGER, or give the output folder a batch of an earlier version ran with in --out',
      );
    }
    const outDir = started.outDir ?? options.outDir;
    if (!outDir) throw new Error(`batch ${batchId} has no output folder recorded: give it in --out`);
    source = { file: started.file, outDir, defaultModel: started.defaultModel };
  }
  const rows = await collectResults({
    client,
    batchId,
    file: source.file,
    ...(source.defaultModel ? { defaultModel: source.defaultModel } : {}),
    ledger,
  });
  // A batch still running (or paused) starts its rows not started yet itself: never offered for a run of their own.
  return writeResults(options.outDir ?? source.outDir, batchId, rows, { open: described?.status === 'RUNNING' });
}

export type BatchMemo = { file?: string; outDir?: string; defaultModel?: string };

/** The memo of the batch's workflow, or undefined when Temporal does not know it. */
export async function batchMemo(client: Client, batchId: string): Promise<BatchMemo | undefined> {
  return (await describeBatch(client, batchId))?.memo;
}

/** The memo and status of the batch's latest run, or undefined when Temporal does not know it. */
export async function describeBatch(
  client: Client,
  batchId: string,
): Promise<{ memo: BatchMemo; status: string } | undefined> {
  try {
    const description = await client.workflow.getHandle(batchWorkflowId(batchId)).describe();
    return { memo: description.memo ?? {}, status: description.status.name };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** `imagebatch results BATCH`: writes the result files and prints where they are. */
export const resultsCommand = defineCommand({
  name: 'results',
  description: 'Write results.csv, results.jsonl, errors.csv and the index.html gallery (also while it runs)',
  summary: 'Write the result files and gallery of a batch',
  args: [{ name: 'batch', description: 'the batch id' }],
  options: [
    {
      flags: '--out <dir>',
      description:
        'where to write (default: the batch output folder); for a batch of an earlier version, its output folder',
    },
    { flags: '--json', description: 'print the written paths as JSON' },
  ],
  schema: z.object({ batch: batchId, out: z.string().optional(), json: flag }),
  async run(opts, { stdout, env }) {
    await withClient(async (client) => {
      const written = await withLedgerStore(env, (ledger) =>
        results({ client, batchId: opts.batch, ledger, env, ...(opts.out ? { outDir: path.resolve(opts.out) } : {}) }),
      );
      stdout(
        opts.json
          ? `${JSON.stringify(written)}\n`
          : `${written.rows} rows -> ${written.resultsCsv}\ngallery: ${written.gallery}\n${resultFilesSummary(opts.batch, written).join('\n')}\n`,
      );
    }, env);
  },
});
