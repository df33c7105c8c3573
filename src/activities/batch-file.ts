import path from 'node:path';
import { Context } from '@temporalio/activity';
import { BatchFileError, BatchFileErrorReason, readBatchPage } from '../batch';
import { batchFileFailure } from './failures';
import { whileHeartbeating } from './heartbeat';
import type { ReadBatchPageInput, ReadBatchPageResult } from '../model';

/** The page-reading activity: one page of validated rows, resumed exactly at the cursor. */
export function createBatchFileActivities(deps: { outputRoot: string }) {
  return {
    async readBatchPage(input: ReadBatchPageInput): Promise<ReadBatchPageResult> {
      const file = path.resolve(deps.outputRoot, input.file);
      try {
        // Heartbeats while it reads: a file on a slow disk or share must not look like a dead worker.
        const page = await whileHeartbeating(
          Context.current(),
          readBatchPage(file, input.cursor, {
            maxRows: input.maxRows,
            ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
            ...(input.userColumns ? { userColumns: input.userColumns } : {}),
          }),
        );
        // Problems stay out of the workflow's history (they can be many and long); `imagebatch validate` lists
        // them. The count is kept. So do carried cells: results read them back from the file.
        const rows = page.rows.map(({ rowId, line, request }) => ({ rowId, line, request }));
        return { rows, invalidRows: page.invalidRows, nextCursor: page.nextCursor, done: page.done };
      } catch (err) {
        if (err instanceof BatchFileError) {
          throw batchFileFailure(
            `${input.file}: ${err.message}`,
            { code: err.code, reason: err.reason },
            err.reason === BatchFileErrorReason.Changed,
          );
        }
        throw err;
      }
    },
  };
}
