import { z } from 'zod';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { flag } from '../options';
import { listBatches } from './batch-control';

/** `imagebatch ls`: batches with their states, newest first. */
export const lsCommand = defineCommand({
  name: 'ls',
  description: 'Batches with their states, newest first',
  options: [{ flags: '--json', description: 'print as JSON' }],
  schema: z.object({ json: flag }),
  async run(opts, { stdout, env }) {
    await withClient(async (client) => {
      const list = await listBatches(client);
      stdout(
        opts.json
          ? `${JSON.stringify(list)}\n`
          : list.map((b) => `${b.batchId}\t${b.status}\t${b.startTime}`).join('\n') + (list.length ? '\n' : ''),
      );
    }, env);
  },
});
