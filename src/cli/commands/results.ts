import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { z } from 'zod';
import { ledgerFileOf, readLedgerOnce, type LedgerView } from '../../ledger';
import { collectResults, writeResults, type WrittenResults } from '../../results';
import { batchWorkflowId } from '../../model';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { batchId, flag } from '../options';
import { resultFilesSummary } from './demo';

export interface ResultsOptions {
  client: Client;
  batchId: string;
  /**
   * Where to write. For a batch Temporal no longer knows (its retention passed, or the server was reset), the
   * batch's output folder: its ledger says which file the batch ran and what became of every row.
   * @default the batch's own output folder
   */
  outDir?: string;
}

/**
 * `imagebatch results BATCH`: results.csv, results.jsonl, errors.csv and index.html, from the row workflows and the
 * output folder's ledger. The batch file and output folder come from the batch's memo, so only its id is needed;
 * once Temporal has forgotten the batch, from the last `batch` event of the ledger in `outDir`. Works while it runs.
 */
export async function results(options: ResultsOptions): Promise<WrittenResults> {
  const { client, batchId } = options;
  const memo = await batchMemo(client, batchId);
  let source: { file: string; outDir: string; defaultModel?: string | undefined; ledger?: LedgerView | undefined };
  if (memo) {
    if (!memo.file || !memo.outDir) throw new Error(`batch ${batchId} has no file recorded in its memo`);
    // The workers' folder may not be visible from here (a cluster): then Temporal alone answers.
    const ledger = await readLedgerOnce(ledgerFileOf(memo.outDir)).catch(() => undefined);
    source = { file: memo.file, outDir: memo.outDir, defaultModel: memo.defaultModel || undefined, ledger };
  } else {
    if (!options.outDir) {
      throw new Error(
        `batch ${batchId} is not known to Temporal (retention passed?): give its output folder with --out`,
      );
    }
    const ledgerFile = ledgerFileOf(options.outDir);
    const ledger = await readLedgerOnce(ledgerFile);
    const started = ledger.batches(batchId).at(-1);
    if (!started) {
      throw new Error(
        `batch ${batchId} is not known to Temporal (retention passed?), and ${ledgerFile} has no record of it: ` +
          'give the output folder it ran with in --out',
      );
    }
    source = { file: started.file, outDir: options.outDir, defaultModel: started.defaultModel, ledger };
  }
  const rows = await collectResults({
    client,
    batchId,
    file: source.file,
    ...(source.defaultModel ? { defaultModel: source.defaultModel } : {}),
    ...(source.ledger ? { ledger: source.ledger } : {}),
  });
  return writeResults(options.outDir ?? source.outDir, batchId, rows);
}

export type BatchMemo = { file?: string; outDir?: string; defaultModel?: string };

/** The memo of the batch's workflow, or undefined when Temporal does not know it. */
export async function batchMemo(client: Client, batchId: string): Promise<BatchMemo | undefined> {
  try {
    const description = await client.workflow.getHandle(batchWorkflowId(batchId)).describe();
    return description.memo ?? {};
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** `imagebatch results BATCH`: writes the result files and prints where they are. */
export const resultsCommand = defineCommand({
  name: 'results',
  description: 'Write results.csv, results.jsonl, errors.csv and the index.html gallery (also while it runs)',
  args: [{ name: 'batch', description: 'the batch id' }],
  options: [
    {
      flags: '--out <dir>',
      description:
        'where to write (default: the batch output folder); for a batch Temporal no longer knows, its output folder',
    },
    { flags: '--json', description: 'print the written paths as JSON' },
  ],
  schema: z.object({ batch: batchId, out: z.string().optional(), json: flag }),
  async run(opts, { stdout, env }) {
    await withClient(async (client) => {
      const written = await results({
        client,
        batchId: opts.batch,
        ...(opts.out ? { outDir: path.resolve(opts.out) } : {}),
      });
      stdout(
        opts.json
          ? `${JSON.stringify(written)}\n`
          : `${written.rows} rows -> ${written.resultsCsv}\ngallery: ${written.gallery}\n${resultFilesSummary(opts.batch, written).join('\n')}\n`,
      );
    }, env);
  },
});
