import type { Client } from '@temporalio/client';
import type { RunResultsWriter } from '../model';
import type { LedgerStore } from '../ledger';
import { collectResults } from './collect';
import { writeResults } from './write';

/**
 * The result files of a scheduled run, written by its worker when the run ends: what `imagebatch results` writes,
 * from the same rows. Handed to the activities (`ActivityDeps.writeResults`), which sit below this folder.
 */
export function runResultsWriter(deps: { client: Client; ledger: LedgerStore }): RunResultsWriter {
  return async (run) => {
    const rows = run.file
      ? await collectResults({
          client: deps.client,
          batchId: run.batchId,
          file: run.file,
          ledger: deps.ledger,
          ...(run.defaultModel ? { defaultModel: run.defaultModel } : {}),
        })
      : [];
    return writeResults(run.outDir, run.batchId, rows, { open: false });
  };
}
