import { z } from 'zod';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { batchId, flag } from '../options';
import { pauseNotice, progressLine } from '../progress-line';
import { batchStatus } from './batch-control';

/** `imagebatch status BATCH`: counts per state, spend, rate, and why it waits. */
export const statusCommand = defineCommand({
  name: 'status',
  description: 'Progress of a batch: counts per state, spend, rate, and why it waits',
  summary: 'Progress of a batch: counts, spend, why it waits',
  args: [{ name: 'batch', description: 'the batch id' }],
  options: [{ flags: '--json', description: 'print as JSON' }],
  schema: z.object({ batch: batchId, json: flag }),
  async run(opts, { stdout, env }) {
    await withClient(async (client) => {
      const p = await batchStatus(client, opts.batch);
      if (opts.json) return stdout(`${JSON.stringify(p)}\n`);
      // A pause only a person can lift is said in full, with what to do, under the line.
      const notice = pauseNotice(opts.batch, p.waiting);
      stdout(`${p.status}: ${progressLine(p, p.rowsRead)}\n${notice ? `${notice}\n` : ''}`);
    }, env);
  },
});
