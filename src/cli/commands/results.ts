import type { Client } from '@temporalio/client';
import { collectResults, writeResults, type WrittenResults } from '../../results';
import { batchWorkflowId } from '../../workflows/keys';

export interface ResultsOptions {
  client: Client;
  batchId: string;
  /**
   * Where to write.
   * @default the batch's own output folder
   */
  outDir?: string;
}

/**
 * `imagebatch results BATCH`: results.csv, results.jsonl, errors.csv and index.html, from the row workflows.
 * The batch file and output folder come from the batch's memo, so only its id is needed. Works while it runs.
 */
export async function results(options: ResultsOptions): Promise<WrittenResults> {
  const description = await options.client.workflow.getHandle(batchWorkflowId(options.batchId)).describe();
  const memo = (description.memo ?? {}) as { file?: string; outDir?: string; defaultModel?: string };
  if (!memo.file || !memo.outDir) throw new Error(`batch ${options.batchId} has no file recorded in its memo`);
  const rows = await collectResults({
    client: options.client,
    batchId: options.batchId,
    file: memo.file,
    ...(memo.defaultModel ? { defaultModel: memo.defaultModel } : {}),
  });
  return writeResults(options.outDir ?? memo.outDir, options.batchId, rows);
}
