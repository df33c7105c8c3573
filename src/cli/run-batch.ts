import type { Client } from '@temporalio/client';
import type { LedgerStore } from '../ledger';
import type { BatchProgress } from '../model';
import { webUiOf } from '../local/local';
import { followBatch, startOrAttachBatch, type PreparedBatch, type StartedBatch } from './batches';
import { connectClient, superviseLocal, type ConnectedClient } from './client';
import { type CommandContext } from './command';
import { resultFilesSummary } from './commands/demo';
import { describeBatch, results } from './commands/results';
import { ExitCode } from './errors';
import { checkModelsOf } from './model-check';
import { sayPaidBefore } from './paid-before';
import { checkDeclaredPrices } from './price-floor';
import { ProgressDisplay } from './progress-display';
import { pauseNotice, progressLine } from './progress-line';
import { rerunLine, runExit, sentSince, spendMark, type SpendMark } from './run-outcome';
import { checkService, stopIfUnusable } from './service-check';
import { terminalText } from './terminal-text';

/** What `run` was told about following the batch and its ending (its flags). */
export interface RunChoices {
  /** Follow to the end (local mode follows unless `detach`). */
  follow?: boolean | undefined;
  /** Local mode: start the batch and return. */
  detach?: boolean | undefined;
  /** The final progress (or the started batch) as JSON on stdout. */
  json?: boolean | undefined;
  /** Exit 0 unless no row succeeded. */
  allowPartial?: boolean | undefined;
}

/**
 * `run` once its file is checked and its batch id known: connects (starting local mode's server and worker when no
 * Temporal address is set), says what the batch will pay, starts or attaches to it, and follows it when asked (or
 * in local mode) to its exit code.
 */
export async function runBatch(
  prepared: PreparedBatch,
  ledger: LedgerStore,
  choices: RunChoices,
  context: CommandContext,
): Promise<ExitCode | undefined> {
  const { stdout, stderr, env, signal } = context;
  const { batchId } = prepared.input;
  const connected = await connectClient(env, { local: 'worker', log: (line) => stderr(`${line}\n`) });
  const { client, config, close, local } = connected;
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
    const follows = choices.follow || (local !== undefined && !choices.detach);
    const earlierRun = local || choices.follow ? await describeBatch(client, batchId) : undefined;
    // What the batch will pay, said before its first request (when a worker is there to tell: local mode, or
    // a batch followed to its end); not for a batch that runs already.
    const saysBefore = (local !== undefined || choices.follow === true) && earlierRun?.status !== 'RUNNING';
    if (saysBefore) {
      // A price the start would refuse is refused before the estimate counts at it.
      await checkDeclaredPrices(ledger, prepared.input.prices);
      await sayBeforePaying(client, config.taskQueue, prepared, ledger, stderr);
    }
    // What the store held of the batch before this run: what it sends now is the difference.
    const mark = follows && earlierRun?.status !== 'RUNNING' ? await spendMark(ledger, batchId) : undefined;
    const started = await startOrAttachBatch({
      client,
      taskQueue: config.taskQueue,
      ledger,
      env,
      prepared,
      pricesChecked: saysBefore,
    });
    const { attached, report } = started;
    // A batch id that ran before starts again: its rows that ended are counted from their records, not sent.
    const again = !attached && (earlierRun !== undefined || (mark?.keys ?? 0) > 0);
    stderr(
      `${attached ? 'attached to' : 'started'} batch ${batchId}${again ? ' again' : ''} (${report.validRows} rows)\n`,
    );
    // Local mode follows unless told not to: the batch is this command's work on this machine.
    if (!follows) {
      if (choices.json) stdout(`${JSON.stringify({ batchId, attached })}\n`);
      return;
    }
    const final = await followToEnd(started, batchId, choices, connected, context);
    if (final === undefined) {
      // Ctrl-C stops following, nothing else: the batch goes on where its worker runs.
      const where = local
        ? `in the local worker (pid ${local.worker?.pid}); imagebatch local stop pauses it, this command again resumes it`
        : `on the workers of ${config.address}`;
      stderr(`stopped following; batch ${batchId} goes on ${where} (imagebatch status ${batchId})\n`);
      return ExitCode.Interrupted;
    }
    return await endOfRun(
      final,
      { batchId, rows: report.validRows, again, mark, ledger, client, local },
      choices,
      context,
    );
  } finally {
    await close();
  }
}

/**
 * The free checks first, on the worker (it holds the key): a base URL nobody answers at, or a refused key, stops
 * here with what to fix, before any row is started. The same GET reads the catalog: a model the account lacks stops
 * here too (exit 3); a catalog that could not be read blocks nothing. Then what the store says was paid before.
 */
async function sayBeforePaying(
  client: Client,
  taskQueue: string,
  prepared: PreparedBatch,
  ledger: LedgerStore,
  stderr: (text: string) => void,
): Promise<void> {
  const check = await checkService(client, taskQueue);
  stopIfUnusable(check);
  const unchecked = checkModelsOf(prepared.report.models, check);
  if (unchecked) stderr(`${terminalText(unchecked)}\n`);
  const { input } = prepared;
  const ask = {
    file: input.file,
    storeId: ledger.id,
    batchId: input.batchId,
    ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    ...(input.userColumns ? { userColumns: input.userColumns } : {}),
    ...(input.ledger?.newImages ? { newImages: true } : {}),
  };
  stderr(`${terminalText(await sayPaidBefore(client, taskQueue, ask, input.prices ?? {}))}\n`);
}

/** Follows the batch to its end with a progress display; undefined when Ctrl-C stopped following. */
async function followToEnd(
  started: StartedBatch,
  batchId: string,
  choices: RunChoices,
  { client, local }: ConnectedClient,
  { stderr, stderrIsTTY, env, signal }: CommandContext,
): Promise<BatchProgress | undefined> {
  const rows = started.report.validRows;
  const tty = stderrIsTTY && !choices.json;
  const display = new ProgressDisplay({ write: stderr, tty, env });
  // Local mode: the local server and worker are started again if one goes while the batch is followed.
  let lastNotice: string | undefined;
  const unwatch = local ? superviseLocal(env, (line) => display.line(line)) : () => undefined;
  return client
    .withAbortSignal(signal, () =>
      followBatch(
        started.handle,
        // Not on a terminal, the last progress is the command's result (stdout), not a line of stderr.
        (p) => {
          const notice = choices.json ? undefined : pauseNotice(batchId, p.waiting);
          if (notice !== undefined && notice !== lastNotice) display.line(notice);
          lastNotice = notice;
          if (!choices.json && (tty || !p.done)) display.update(p, rows);
        },
        {
          onNoAnswer: (err) => display.line(`imagebatch: ${terminalText(err.message)} (still waiting; Ctrl-C stops)`),
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
}

/** What the end of a followed run reports on. */
interface RunEnd {
  batchId: string;
  /** The file's valid rows. */
  rows: number;
  /** The batch id ran before. */
  again: boolean;
  /** What the store held of the batch before this run, when it was read. */
  mark: SpendMark | undefined;
  ledger: LedgerStore;
  client: Client;
  local: ConnectedClient['local'];
}

/**
 * The followed batch's last progress (stdout), what a re-run sent, the exit code (README "Exit codes"), and in local
 * mode the result files.
 */
async function endOfRun(
  final: BatchProgress,
  end: RunEnd,
  choices: RunChoices,
  { stdout, stderr, env }: CommandContext,
): Promise<ExitCode | undefined> {
  const { batchId, rows, ledger } = end;
  stdout(choices.json ? `${JSON.stringify(final)}\n` : `${progressLine(final, rows)}\n`);
  if (!final.done) return;
  if (end.mark && (end.again || final.counts.reused > 0)) {
    stderr(`${rerunLine(final, rows, await sentSince(ledger, batchId, end.mark))}\n`);
  }
  // A row without its images exits 1 (README "Exit codes"); --allow-partial only when none has them.
  const { code: exit, line } = runExit(final, choices.allowPartial === true);
  if (line) stderr(`${line}\n`);
  if (!end.local) {
    // The workers' output folder may not be visible from here: `results` writes the files where they are.
    stderr(`results: imagebatch results ${batchId}\n`);
    return exit;
  }
  // On this machine the output folder is ours: the result files are written at the end, as the demo does.
  const written = await results({ client: end.client, batchId, ledger, env });
  stderr(
    [
      `results: ${written.resultsCsv} (${written.rows} rows); gallery: ${written.gallery}`,
      ...resultFilesSummary(batchId, written),
    ].join('\n') + '\n',
  );
  return exit;
}
