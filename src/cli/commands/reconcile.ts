import path from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import type { WrittenResults } from '../../results';
import { reconcileWorkflow, type ReconcileSummary } from '../../workflows';
import { batchWorkflowId } from '../../model';
import { z } from 'zod';
import { connectClient } from '../client';
import { defineCommand } from '../command';
import { ExitCode } from '../errors';
import { batchId, duration, flag } from '../options';
import { terminalText } from '../terminal-text';
import { batchMemo, results } from './results';
import type { LedgerStore } from '../../ledger';
import { withLedgerStore } from '../ledger-store';

export interface ReconcileOptions {
  client: Client;
  taskQueue: string;
  batchId: string;
  /** The ledger store: what the batch's rows sent and paid. */
  ledger: LedgerStore;
  /**
   * The batch's output folder, as the workers see it.
   * @default the folder in the batch's memo, else its last start in the store
   */
  outDir?: string;
  /**
   * Longest wait for a followed creation to end.
   * @default the row's default, DEFAULT_MAX_POLL_WAIT_MS (src/workflows/timeouts.ts)
   */
  maxPollWaitMs?: number;
}

export interface ReconcileOutcome {
  summary: ReconcileSummary;
  written: WrittenResults;
}

/** Workflow id of the reconcile of a batch: one at a time; running it again while it runs attaches to it. */
export const reconcileWorkflowId = (batchId: string) => `reconcile/${batchId}`;

/**
 * `imagebatch reconcile BATCH`: resolves, on a worker (the API key lives there), every row of the batch whose money
 * the ledger leaves unresolved, with the row's own key and never a new one (see reconcileWorkflow), then writes the
 * results again from the ledger.
 */
export async function reconcile(options: ReconcileOptions): Promise<ReconcileOutcome> {
  const { client, batchId } = options;
  const status = await batchStatusName(client, batchId);
  if (status === 'RUNNING') {
    // Its rows in flight are still resolving their own keys: reconcile would follow them a second time.
    throw new Error(`batch ${batchId} is still running: reconcile it once it has ended (imagebatch status ${batchId})`);
  }
  const outDir =
    options.outDir ??
    (await batchMemo(client, batchId))?.outDir ??
    (await options.ledger.batches(batchId)).at(-1)?.outDir;
  if (!outDir) {
    throw new Error(
      `batch ${batchId} is known neither to Temporal nor to the ledger store ${options.ledger.location}: check ` +
        'IMAGEBATCH_LEDGER, or give the output folder a batch of an earlier version ran with in --out',
    );
  }
  const handle = await client.workflow.start(reconcileWorkflow, {
    workflowId: reconcileWorkflowId(batchId),
    taskQueue: options.taskQueue,
    args: [
      { batchId, outDir, ...(options.maxPollWaitMs === undefined ? {} : { maxPollWaitMs: options.maxPollWaitMs }) },
    ],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
  });
  const summary = await handle.result();
  const written = await results({ client, batchId, outDir, ledger: options.ledger });
  return { summary, written };
}

/** The terminal's lines for a reconcile: the counts, then each row that is still reported, with why. */
export function reconcileLines(outcome: ReconcileOutcome): string[] {
  const { summary, written } = outcome;
  const lines = [
    `reconcile ${summary.batchId}: ${summary.examined} row(s) unresolved; ${summary.resolved} resolved, ` +
      `${summary.reported} reported (never submitted under a new key)`,
  ];
  for (const row of summary.rows) {
    lines.push(`  ${row.rowId}: ${row.before} -> ${row.after}${row.resolved ? '' : ' (reported)'}: ${row.note}`);
  }
  if (summary.rows.length < summary.examined) lines.push(`  ... and ${summary.examined - summary.rows.length} more`);
  if (summary.stoppedBy) lines.push(`stopped: ${summary.stoppedBy}; fix it, then run imagebatch reconcile again`);
  lines.push(`results: ${written.resultsCsv} (${written.unresolvedRows} row(s) left in ${written.unresolvedCsv})`);
  return lines;
}

/** The batch workflow's status, or undefined when Temporal does not know it. */
async function batchStatusName(client: Client, batchId: string): Promise<string | undefined> {
  try {
    return (await client.workflow.getHandle(batchWorkflowId(batchId)).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** `imagebatch reconcile BATCH`: exit 1 while rows stay reported or it stopped. */
export const reconcileCommand = defineCommand({
  name: 'reconcile',
  description:
    'Resolve the rows whose money is unresolved (unknown, max wait reached, images unsaved) with their own keys, ' +
    'never a new one; rows that cannot be resolved are reported. A worker must be running',
  summary: 'Resolve the rows whose money is unresolved',
  args: [{ name: 'batch', description: 'the batch id' }],
  options: [
    { flags: '--out <dir>', description: "the batch's output folder (only for a batch of an earlier version)" },
    { flags: '--max-poll-wait <duration>', description: 'longest wait for a followed creation to end (default 30m)' },
    { flags: '--json', description: 'print the summary as JSON' },
  ],
  schema: z.object({ batch: batchId, out: z.string().optional(), maxPollWait: duration().optional(), json: flag }),
  async run(opts, { stdout, stderr, env, signal }) {
    const { client, config, close } = await connectClient(env, { local: 'worker', log: (line) => stderr(`${line}\n`) });
    try {
      const outcome = await withLedgerStore(env, (ledger) =>
        client.withAbortSignal(signal, () =>
          reconcile({
            client,
            taskQueue: config.taskQueue,
            batchId: opts.batch,
            ledger,
            ...(opts.out ? { outDir: path.resolve(opts.out) } : {}),
            ...(opts.maxPollWait === undefined ? {} : { maxPollWaitMs: opts.maxPollWait }),
          }),
        ),
      );
      stdout(opts.json ? `${JSON.stringify(outcome)}\n` : `${reconcileLines(outcome).map(terminalText).join('\n')}\n`);
      return outcome.summary.reported > 0 || outcome.summary.stoppedBy ? ExitCode.Failure : ExitCode.Ok;
    } finally {
      await close();
    }
  },
});
