import { z } from 'zod';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { batchId, flag } from '../options';
import { progressLine } from '../progress-line';
import { batchStatus } from './batch-control';

/** `imagebatch status BATCH`: counts per state, spend, rate, and why it waits. */
export const statusCommand = defineCommand({
  name: 'status',
  description: 'Progress of a batch: counts per state, spend, rate, and why it waits',
  args: [{ name: 'batch', description: 'the batch id' }],
  options: [{ flags: '--json', description: 'print as JSON' }],
  schema: z.object({ batch: batchId, json: flag }),
  async run(opts, { stdout, env }) {
    await withClient(async (client) => {
      const p = await batchStatus(client, opts.batch);
      stdout(opts.json ? `${JSON.stringify(p)}\n` : `${p.status}: ${progressLine(p, p.rowsRead)}\n`);
    }, env);
  },
});
