import { z } from 'zod';
import { withClient } from '../client';
import { defineCommand } from '../command';
import { withLedgerStore } from '../ledger-store';
import { checkDeclaredPrices } from '../price-floor';
import { batchId, dollars, flag } from '../options';
import { priceOptions, priceSchema, userPrices } from '../prices';
import { BatchAction, controlBatch } from './batch-control';

/** Their lines in `imagebatch --help`. */
const SUMMARIES: Record<BatchAction, string> = {
  pause: 'Pause a batch (rows in flight finish)',
  resume: 'Resume a paused or stopped batch',
  cancel: 'Cancel a batch (rows in flight are cancelled)',
};

const DESCRIPTIONS: Record<BatchAction, string> = {
  pause: 'Pause a batch: no new row starts, rows in flight finish',
  resume: 'Resume a paused or stopped batch (after a top-up, a new key, or with a higher --spend-cap)',
  cancel: 'Cancel a batch: no new row starts, rows in flight are cancelled',
};

/** `imagebatch pause|resume|cancel BATCH`: a signal to the running batch; prints its state after it. */
export const controlCommands = Object.values(BatchAction).map((action) =>
  defineCommand({
    name: action,
    description: DESCRIPTIONS[action],
    summary: SUMMARIES[action],
    args: [{ name: 'batch', description: 'the batch id' }],
    options: [
      { flags: '--spend-cap <usd>', description: 'resume only: a new spend cap' },
      ...priceOptions('resume only: '),
      { flags: '--json', description: 'print the progress as JSON' },
    ],
    schema: z.object({ batch: batchId, spendCap: dollars.optional(), ...priceSchema, json: flag }),
    async run(opts, { stdout, stderr, env }) {
      const prices = await userPrices(opts);
      // A price given to resume is checked against what the service charged, like one given to run.
      if (Object.keys(prices).length > 0) await withLedgerStore(env, (ledger) => checkDeclaredPrices(ledger, prices));
      await withClient(
        async (client) => {
          const p = await controlBatch(client, opts.batch, action, {
            ...(opts.spendCap === undefined ? {} : { spendCapUsd: opts.spendCap }),
            ...(Object.keys(prices).length > 0 ? { prices } : {}),
          });
          stdout(opts.json ? `${JSON.stringify(p)}\n` : `${action}: ${p.status}\n`);
          // Local mode: a resumed batch needs the local worker running.
        },
        env,
        { local: action === BatchAction.Resume ? 'worker' : 'server', log: (line) => stderr(`${line}\n`) },
      );
    },
  }),
);
