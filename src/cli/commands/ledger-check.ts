import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { LedgerCheckSummary } from '../../model';
import { ledgerCheckWorkflow } from '../../workflows';
import { connectClient } from '../client';
import { defineCommand } from '../command';
import { ExitCode } from '../errors';
import { withLedgerStore } from '../ledger-store';
import { batchId, flag } from '../options';
import { terminalText } from '../terminal-text';

/** The check's lines for a person: the counts, then each difference. */
export function checkLines(summary: LedgerCheckSummary, location: string): string[] {
  const lines = [
    `ledger store ${location} against the service: ${summary.checked} creation(s) asked by id, ${summary.agree} ` +
      `agree, ${summary.findingCount} differ; ${summary.withoutCreation} key(s) with no creation known ` +
      '(not asked: imagebatch reconcile resolves them)',
  ];
  for (const f of summary.findings) {
    lines.push(
      `  ${f.batchId} ${f.rowId} ${f.idempotencyKey}${f.creationId ? ` (${f.creationId})` : ''}: ${f.problem}`,
    );
  }
  if (summary.findings.length < summary.findingCount) {
    lines.push(`  ... and ${summary.findingCount - summary.findings.length} more`);
  }
  return lines.map(terminalText);
}

/** `imagebatch ledger check`: each key's creation, asked by its own id on a worker; exit 1 when one differs. */
export const ledgerCheckCommand = defineCommand({
  name: 'check',
  description:
    "Ask the service, on a worker, for each key's creation by its own id (never a new request) and compare it with " +
    'the ledger store; exit 1 when one differs',
  options: [
    { flags: '--batch <id>', description: 'only this batch' },
    { flags: '--json', description: 'print the summary as JSON' },
  ],
  schema: z.object({ batch: batchId.optional(), json: flag }),
  async run(opts, { stdout, stderr, env, signal }) {
    const { storeId, location } = await withLedgerStore(env, async (store) => ({
      storeId: store.id,
      location: store.location,
    }));
    const { client, config, close } = await connectClient(env, { local: 'worker', log: (line) => stderr(`${line}\n`) });
    try {
      const summary = await client.withAbortSignal(signal, () =>
        client.workflow.execute(ledgerCheckWorkflow, {
          workflowId: `ledger-check/${opts.batch ?? 'all'}/${randomUUID()}`,
          taskQueue: config.taskQueue,
          args: [{ storeId, ...(opts.batch ? { batchId: opts.batch } : {}) }],
        }),
      );
      stdout(opts.json ? `${JSON.stringify(summary)}\n` : `${checkLines(summary, location).join('\n')}\n`);
      return summary.findingCount > 0 ? ExitCode.Failure : ExitCode.Ok;
    } finally {
      await close();
    }
  },
});
