import path from 'node:path';
import { z } from 'zod';
import {
  batchAsks,
  defaultBatchId,
  followBatch,
  prepareBatch,
  startOrAttachBatch,
  type PreparedBatch,
} from '../batches';
import type { LedgerStore } from '../../ledger';
import { withLedgerStore } from '../ledger-store';
import { connectClient, superviseLocal } from '../client';
import { columnOptions, columnSchema, userColumnsInput } from '../columns';
import { defineCommand } from '../command';
import { batchId, deadline, duration, flag, positiveInt, dollars } from '../options';
import { priceOptions, priceSchema, pricesInput } from '../prices';
import { ProgressDisplay } from '../progress-display';
import { pauseNotice, progressLine } from '../progress-line';
import { terminalText } from '../terminal-text';
import { ExitCode } from '../errors';
import { webUiOf } from '../../local/local';
import { resultFilesSummary } from './demo';
import { describeBatch, results } from './results';
import { sayPaidBefore } from '../paid-before';
import { STOP_LOSS_HELP, stopLossSchema } from '../stop-loss-option';
import { checkService, stopIfUnusable } from '../service-check';
import { fileNotes, writeRejected } from '../file-rows';
import { checkModelsOf } from '../model-check';
import { rerunLine, runExit, sentSince, spendMark } from '../run-outcome';

/** The name of a file run without `--batch-id`: without the extension, other characters as `-`. */
const nameOf = (file: string) =>
  path
    .basename(file)
    .replace(/\.[^.]*$/, '')
    .replace(/[^A-Za-z0-9._:-]/g, '-');

/** `imagebatch run FILE`: start a batch, or attach to the running one with the same id; `--follow` to its end. */
export const runCommand = defineCommand({
  name: 'run',
  description: 'Start a batch (or attach to the running one): on TEMPORAL_ADDRESS, else locally',
  summary: 'Start a batch, or attach to the running one',
  args: [{ name: 'file', description: 'the batch file (CSV)' }],
  options: [
    {
      flags: '--batch-id <id>',
      description: 'default: the file name; the same id again resumes',
    },
    { flags: '--model <id>', description: 'model of rows that name none' },
    { flags: '--out <dir>', description: 'output folder (default: out/<batch id>)' },
    { flags: '--new-images', description: 'pay again for requests paid before (no reuse)' },
    { flags: '--concurrency <n>', description: 'rows in flight at most (default: found, up to 256)' },
    { flags: '--max-attempts <n>', description: 'attempts per row (after refunds)', default: '3' },
    { flags: '--spend-cap <usd>', description: 'the most the batch may spend (needs every price)' },
    ...priceOptions(),
    ...columnOptions(true),
    { flags: '--deadline <iso>', description: 'rows not started by then end as not_run (ISO 8601)' },
    { flags: '--max-poll-wait <duration>', description: 'longest wait for one creation (default 30m)' },
    { flags: '--stop-loss <settings>', description: STOP_LOSS_HELP },
    { flags: '--skip-invalid', description: 'run the valid rows; list the others in rejected.csv' },
    { flags: '--follow', description: 'show progress to the end (local mode: default)' },
    { flags: '--detach', description: 'local mode: start the batch and return' },
    { flags: '--allow-partial', description: 'exit 0 unless no row succeeded' },
    { flags: '--json', description: 'print the final progress as JSON' },
  ],
  schema: z.object({
    file: z.string(),
    batchId: batchId.optional(),
    model: z.string().optional(),
    out: z.string().optional(),
    newImages: flag,
    concurrency: positiveInt.optional(),
    maxAttempts: positiveInt,
    spendCap: dollars.optional(),
    ...priceSchema,
    ...columnSchema,
    deadline: deadline.optional(),
    maxPollWait: duration().optional(),
    stopLoss: stopLossSchema.optional(),
    skipInvalid: flag,
    follow: flag,
    detach: flag,
    allowPartial: flag,
    json: flag,
  }),
  async run(opts, { stdout, stderr, stderrIsTTY, env, signal }) {
    const columns = userColumnsInput(opts);
    const prices = await pricesInput(opts);
    const name = opts.batchId ?? nameOf(opts.file);
    // The file is read and checked before anything connects: a wrong file is said at once.
    const checked = await prepareBatch({
      batchId: name,
      file: opts.file,
      outDir: opts.out ?? path.join('out', name),
      ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
      maxAttempts: opts.maxAttempts,
      ...(opts.model ? { defaultModel: opts.model } : {}),
      ...(opts.spendCap === undefined ? {} : { spendCapUsd: opts.spendCap }),
      ...prices,
      ...columns,
      ...(opts.deadline ? { deadline: opts.deadline } : {}),
      ...(opts.maxPollWait === undefined ? {} : { maxPollWaitMs: opts.maxPollWait }),
      ...(opts.newImages ? { ledger: { newImages: true } } : {}),
      ...(opts.stopLoss ? { stopLoss: opts.stopLoss } : {}),
      ...(opts.skipInvalid ? { skipInvalid: true } : {}),
    });
    for (const note of fileNotes(checked.report)) stderr(`${opts.file}: ${terminalText(note)}\n`);
    // The store of what was paid: without it nothing starts.
    return withLedgerStore(env, async (ledger) => {
      // A file's own name serves as its id while the store knows no other content under it.
      const batchId =
        opts.batchId ?? (await defaultBatchId(ledger, name, checked.fingerprint, batchAsks(checked.input)));
      if (batchId !== name) {
        stderr(`batch ${name} ran other content (another file or options): this one is batch ${batchId}\n`);
      }
      const outDir = opts.out ? checked.input.outDir : path.resolve('out', batchId);
      const prepared: PreparedBatch = { ...checked, input: { ...checked.input, batchId, outDir } };
      // --skip-invalid: the rows left out are listed beside the results before the batch starts.
      const rejected = opts.skipInvalid ? await writeRejected(outDir, checked.report) : undefined;
      if (rejected) stderr(`${terminalText(rejected)}\n`);
      return runBatch(prepared, ledger);
    });

    async function runBatch(prepared: PreparedBatch, ledger: LedgerStore): Promise<ExitCode | undefined> {
      const { batchId } = prepared.input;
      const { client, config, close, local } = await connectClient(env, {
        local: 'worker',
        log: (line) => stderr(`${line}\n`),
      });
      try {
        // Ctrl-C while the local server and worker started: they run on, and no batch is started.
        if (signal.aborted) {
          stderr(
            `interrupted before batch ${batchId} started${local ? ' (imagebatch local stop stops the local server)' : ''}\n`,
          );
          return ExitCode.Interrupted;
        }
        if (local) {
          stderr(
            `running locally: state in ${local.home}, Temporal ${local.server.address}, ` +
              `Web UI ${webUiOf(local.server)} (imagebatch local status)\n`,
          );
        }
        const follows = opts.follow || (local !== undefined && !opts.detach);
        const earlierRun = local || opts.follow ? await describeBatch(client, batchId) : undefined;
        // What the batch will pay, said before its first request (when a worker is there to tell: local mode, or
        // a batch followed to its end); not for a batch that runs already.
        if ((local || opts.follow) && earlierRun?.status !== 'RUNNING') {
          // The free checks first, on the worker (it holds the key): a base URL nobody answers at, or a refused key,
          // stops here with what to fix, before any row is started. The same GET reads the catalog: a model the
          // account lacks stops here too (exit 3); a catalog that could not be read blocks nothing.
          const check = await checkService(client, config.taskQueue);
          stopIfUnusable(check);
          const unchecked = checkModelsOf(prepared.report.models, check);
          if (unchecked) stderr(`${terminalText(unchecked)}\n`);
          const { input } = prepared;
          const ask = {
            file: input.file,
            storeId: ledger.id,
            ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
            ...(input.userColumns ? { userColumns: input.userColumns } : {}),
            ...(input.ledger?.newImages ? { newImages: true } : {}),
          };
          stderr(`${terminalText(await sayPaidBefore(client, config.taskQueue, ask, input.prices ?? {}))}\n`);
        }
        // What the store held of the batch before this run: what it sends now is the difference.
        const mark = follows && earlierRun?.status !== 'RUNNING' ? await spendMark(ledger, batchId) : undefined;
        const { handle, attached, report } = await startOrAttachBatch({
          client,
          taskQueue: config.taskQueue,
          ledger,
          env,
          prepared,
        });
        // A batch id that ran before starts again: its rows that ended are counted from their records, not sent.
        const again = !attached && (earlierRun !== undefined || (mark?.keys ?? 0) > 0);
        stderr(
          `${attached ? 'attached to' : 'started'} batch ${batchId}${again ? ' again' : ''} (${report.validRows} rows)\n`,
        );
        // Local mode follows unless told not to: the batch is this command's work on this machine.
        if (!follows) {
          if (opts.json) stdout(`${JSON.stringify({ batchId, attached })}\n`);
          return;
        }
        const tty = stderrIsTTY && !opts.json;
        const display = new ProgressDisplay({ write: stderr, tty, env });
        // Local mode: the local server and worker are started again if one goes while the batch is followed.
        let lastNotice: string | undefined;
        const unwatch = local ? superviseLocal(env, (line) => display.line(line)) : () => undefined;
        const final = await client
          .withAbortSignal(signal, () =>
            followBatch(
              handle,
              // Not on a terminal, the last progress is the command's result (stdout), not a line of stderr.
              (p) => {
                const notice = opts.json ? undefined : pauseNotice(batchId, p.waiting);
                if (notice !== undefined && notice !== lastNotice) display.line(notice);
                lastNotice = notice;
                if (!opts.json && (tty || !p.done)) display.update(p, report.validRows);
              },
              {
                onNoAnswer: (err) =>
                  display.line(`imagebatch: ${terminalText(err.message)} (still waiting; Ctrl-C stops)`),
              },
            ),
          )
          .catch((err: unknown) => {
            if (!signal.aborted) throw err;
            return undefined;
          })
          .finally(() => {
            unwatch();
            display.end();
          });
        if (final === undefined) {
          // Ctrl-C stops following, nothing else: the batch goes on where its worker runs.
          const where = local
            ? `in the local worker (pid ${local.worker?.pid}); imagebatch local stop pauses it, this command again resumes it`
            : `on the workers of ${config.address}`;
          stderr(`stopped following; batch ${batchId} goes on ${where} (imagebatch status ${batchId})\n`);
          return ExitCode.Interrupted;
        }
        stdout(opts.json ? `${JSON.stringify(final)}\n` : `${progressLine(final, report.validRows)}\n`);
        if (!final.done) return;
        if (mark && (again || final.counts.reused > 0)) {
          stderr(`${rerunLine(final, report.validRows, await sentSince(ledger, batchId, mark))}\n`);
        }
        // A row without its images exits 1 (README "Exit codes"); --allow-partial only when none has them.
        const { code: exit, line } = runExit(final, opts.allowPartial === true);
        if (line) stderr(`${line}\n`);
        if (!local) {
          // The workers' output folder may not be visible from here: `results` writes the files where they are.
          stderr(`results: imagebatch results ${batchId}\n`);
          return exit;
        }
        // On this machine the output folder is ours: the result files are written at the end, as the demo does.
        const written = await results({ client, batchId, ledger, env });
        stderr(
          [
            `results: ${written.resultsCsv} (${written.rows} rows); gallery: ${written.gallery}`,
            ...resultFilesSummary(batchId, written),
          ].join('\n') + '\n',
        );
        return exit;
      } finally {
        await close();
      }
    }
  },
});
