import { setMaxListeners } from 'node:events';
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { clientDataConverter, payloadCodecsFromEnv, workerDataConverter } from '../../codec';
import { defaultServiceConfig } from '../../config/service-config';
import { collectResults, writeResults, type WrittenResults } from '../../results';
import { DEMO_ACCOUNT_ID, DEMO_API_KEY, DEMO_KEY_ID, FaultKind, resolveConfig, startSimulator } from '../../simulator';
import { DEFAULT_LEDGER_FILE, openLedgerStore } from '../../ledger';
import { DevServer } from '../../temporal/dev-server';
import { projectRoot } from '../../temporal/toolchain';
import { devServerBase } from '../../local/dev-server-base';
import { createWorker, TASK_QUEUE } from '../../worker';
import type { BatchProgress } from '../../model';
import { followBatch, startOrAttachBatch } from '../batches';
import { z } from 'zod';
import { defineCommand } from '../command';
import { flag } from '../options';
import { ProgressDisplay } from '../progress-display';
import { spendText } from '../progress-line';
import { sdkLog } from '../sdk-log';

/** Options of {@link demo}. */
export interface DemoOptions {
  /**
   * Folder of the demo's state: the embedded server's SQLite file and the results, so that a second run finds
   * the first one's history and resumes it.
   * @default `.imagebatch` in the working directory
   */
  home: string;
  /** Lines for a person (progress, addresses); the command's result is the return value. */
  log: (line: string) => void;
  /** Progress updates of the batch, of `totalRows` rows. */
  onProgress?: (p: BatchProgress, totalRows: number) => void;
  /**
   * What the embedded Temporal dev server prints, as it comes.
   * @default dropped
   */
  onServerOutput?: (text: string) => void;
  /** Aborted on Ctrl-C: everything started is stopped cleanly and the batch resumes on the next run. */
  signal?: AbortSignal;
  /**
   * The batch file.
   * @default the bundled examples/demo-prompts.csv (50 prompts, every kind of outcome)
   */
  file?: string;
  /**
   * Where `IMAGEBATCH_PAYLOAD_KEY` / `IMAGEBATCH_PAYLOAD_KEY_FILE` are read from: when set, every payload of the
   * demo's workflows is encrypted (the demo's server keeps its history across runs, so keep the same key).
   * @default the process's environment
   */
  env?: Readonly<Record<string, string | undefined>>;
}

export interface DemoResult {
  batchId: string;
  temporalAddress: string;
  webUi: string | undefined;
  progress: BatchProgress;
  results: WrittenResults;
  galleryUrl: string;
  /** True when this run attached to a batch a previous run had left running. */
  resumed: boolean;
}

const DEMO_BATCH_ID = 'demo';

/**
 * What errors.csv and unresolved.csv hold and what to do with them, one line each (unresolved.csv only when it has
 * rows), from the counts `writeResults` made: the demo's summary and `imagebatch results` print them.
 */
export function resultFilesSummary(batchId: string, written: WrittenResults): string[] {
  const rows = (n: number) => `${n} row${n === 1 ? '' : 's'}`;
  const { submit_again: again, revise_prompt: revise, fix_row: fix } = written.errorAdvice;
  let errors = `errors.csv: no rows to submit again (${written.errorsCsv})`;
  if (written.open) {
    // The batch starts its rows not started yet itself: nothing is offered to run while it is open.
    errors =
      `errors.csv: ${rows(written.errorRows)} ended with nothing paid (${written.errorsCsv}); batch ${batchId} ` +
      `is still open: run the file once it has ended (imagebatch status ${batchId})`;
  } else if (written.errorRows > 0 && again === 0) {
    // Nothing to submit as it is: no command, which would only fail again.
    errors =
      `errors.csv: no rows to submit again as they are; ${revise} to revise (safety filter), ${fix} to fix ` +
      `(rejected): edit or delete ${revise + fix === 1 ? 'that one' : `those ${revise + fix}`} first (${written.errorsCsv})`;
  } else if (written.errorRows > 0) {
    errors =
      `errors.csv: ${rows(again)} to submit again as ${again === 1 ? 'it is' : 'they are'} ` +
      `(imagebatch run ${written.errorsCsv} --batch-id ${batchId}-retry)`;
    if (revise + fix > 0) {
      errors +=
        `, ${revise} to revise (safety filter), ${fix} to fix (rejected): ` +
        `edit or delete ${revise + fix === 1 ? 'that one' : `those ${revise + fix}`} first`;
    }
  }
  const n = written.unresolvedRows;
  const unresolved =
    `unresolved.csv: ${rows(n)} may have been paid: imagebatch reconcile ${batchId} resolves ` +
    `${n === 1 ? 'it; never submit it again' : 'them; never submit them again'} (${written.unresolvedCsv})`;
  const lines = n > 0 ? [errors, unresolved] : [errors];
  const short = written.imagesShortRows;
  if (short > 0) {
    lines.push(
      `results.csv: ${rows(short)} succeeded with fewer images than num_images asked for ` +
        `(column images_short: how many are missing) (${written.resultsCsv})`,
    );
  }
  return lines;
}

/**
 * The simulator as the demo configures it: small limits and scripted prompts, so every outcome shows. Its state
 * is kept in `home`, so that rows in flight when the demo was stopped find their creations on the next run.
 */
function demoSimulatorConfig(home: string) {
  return {
    stateFile: path.join(home, 'simulator-state.json'),
    accounts: [
      { id: DEMO_ACCOUNT_ID, models: ['flux-dev', 'flux-schnell'], keys: [{ id: DEMO_KEY_ID, key: DEMO_API_KEY }] },
    ],
    limits: { requestsPerSecond: 6, burst: 6, minPollIntervalMs: 1000 },
    generation: { queuedMs: { minMs: 100, maxMs: 400 }, runningMs: { minMs: 500, maxMs: 2000 } },
    safety: { genericDeclineProbability: 1 },
    scripts: [
      { match: '[flaky]', faults: [{ kind: FaultKind.FailGeneration }] },
      { match: '[slow-provider]', faults: [{ kind: FaultKind.FailTimedOut }] },
      { match: '[busy-provider]', faults: [{ kind: FaultKind.ProviderUnavailable }] },
      { match: '[lost-response]', faults: [{ kind: FaultKind.ResetAfterCommit }] },
    ],
  };
}

/**
 * `imagebatch demo`: the whole product on one machine with nothing configured. The embedded Temporal dev
 * server (state in a SQLite file), the image-service simulator and a worker run in this process; the bundled
 * batch runs with live progress, and the results and a gallery are written.
 */
export async function demo(options: DemoOptions): Promise<DemoResult> {
  const file = options.file ?? path.join(projectRoot, 'examples', 'demo-prompts.csv');
  const outDir = path.join(options.home, 'demo');
  const dbFile = path.join(options.home, 'temporal.sqlite');
  const codecs = payloadCodecsFromEnv(options.env); // checked before anything starts
  options.log(`starting the embedded Temporal dev server (state in ${dbFile})`);
  const server = await DevServer.start({
    dbFile,
    ...devServerBase(options.env),
    ...(options.onServerOutput ? { onOutput: options.onServerOutput } : {}),
  });
  const sim = await startSimulator(demoSimulatorConfig(options.home));
  // The demo's money is its simulator's, kept in its home: so is its ledger store (never the user's own).
  const ledger = await openLedgerStore({ kind: 'sqlite', file: path.join(options.home, DEFAULT_LEDGER_FILE) });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const connection = await Connection.connect({ address: server.address });
  try {
    const webUi = server.uiUrl ? `${server.uiUrl}/namespaces/default/workflows` : undefined;
    options.log(`Temporal: ${server.address}${webUi ? `  Web UI: ${webUi}` : ''}`);
    options.log(`image service simulator: ${sim.baseUrl}`);
    if (codecs.encryption) options.log(`payloads encrypted with key id ${codecs.encryption.keyId}`);
    const client = new Client({ connection, dataConverter: clientDataConverter(codecs) });
    const worker = await createWorker({
      connection: nativeConnection,
      dataConverter: workerDataConverter(codecs),
      activityDeps: {
        config: defaultServiceConfig({ baseUrl: sim.baseUrl, minPollIntervalMs: 1000 }),
        apiKey: () => DEMO_API_KEY,
        temporalClient: client,
        ledger,
      },
    });
    const aborted = new Promise<never>((_, reject) => {
      if (options.signal?.aborted) reject(new Error('interrupted'));
      options.signal?.addEventListener('abort', () => reject(new Error('interrupted')), { once: true });
    });
    const run = async () => {
      const { handle, attached, report } = await startOrAttachBatch({
        client,
        taskQueue: TASK_QUEUE,
        ledger,
        batchId: DEMO_BATCH_ID,
        file,
        outDir,
        defaultModel: 'flux-dev',
        concurrency: 8,
        maxAttempts: 3,
      });
      const prices = new Map(resolveConfig(demoSimulatorConfig(options.home)).models.map((m) => [m.id, m.price_usd]));
      const estimate = Object.entries(report.models).reduce(
        (sum, [model, usage]) => sum + (prices.get(model) ?? 0) * usage.images,
        0,
      );
      options.log(
        `${attached ? 'resuming' : 'running'} batch "${DEMO_BATCH_ID}": ${report.validRows} rows from ${file} ` +
          `(about $${estimate.toFixed(2)} if every row succeeds at once; Ctrl-C stops, running again resumes)`,
      );
      const progress = await followBatch(handle, (p) => options.onProgress?.(p, report.validRows), {
        ...(options.signal ? { signal: options.signal } : {}),
      });
      // The ledger store too: what the rows wrote there, and what reconcile resolved later.
      const rows = await collectResults({ client, batchId: DEMO_BATCH_ID, file, defaultModel: 'flux-dev', ledger });
      const results = await writeResults(outDir, DEMO_BATCH_ID, rows);
      return { progress, results, attached };
    };
    // Every client call of the run is aborted on Ctrl-C, so no call outlives the connection closed below.
    const controller = new AbortController();
    setMaxListeners(0, controller.signal); // one listener per client call in flight
    options.signal?.addEventListener('abort', () => controller.abort(), { once: true });
    const { progress, results, attached } = await worker.runUntil(
      Promise.race([client.withAbortSignal(controller.signal, run), aborted]),
    );
    return {
      batchId: DEMO_BATCH_ID,
      temporalAddress: server.address,
      webUi,
      progress,
      results,
      galleryUrl: pathToFileURL(results.gallery).href,
      resumed: attached,
    };
  } finally {
    await connection.close();
    await nativeConnection.close();
    await sim.close();
    await ledger.close();
    await server.stop();
  }
}

/**
 * `imagebatch demo`: progress on stderr (redrawn on a terminal), the summary or `--json` on stdout. The worker's and
 * the dev server's logs go to `<home>/logs/` (with `--verbose`, to stderr); a last line on stderr says how many
 * warnings the worker logged and what they were.
 */
export const demoCommand = defineCommand({
  name: 'demo',
  description: 'Run the bundled batch on the embedded Temporal dev server and the simulator (nothing to configure)',
  summary: 'Run the bundled batch here: nothing to set up',
  options: [
    { flags: '--home <dir>', description: 'folder for the demo state and results', default: '.imagebatch' },
    { flags: '--json', description: 'print the result as JSON' },
    { flags: '--verbose', description: 'the worker and dev server logs on stderr instead of <home>/logs/' },
  ],
  schema: z.object({ home: z.string(), json: flag, verbose: flag }),
  async run(opts, { stdout, stderr: write, stderrIsTTY, env, signal }) {
    const home = path.resolve(opts.home);
    const logs = path.join(home, 'logs');
    const display = new ProgressDisplay({ write, tty: stderrIsTTY && !opts.json, env });
    const serverLog = path.join(logs, 'dev-server.log');
    if (opts.verbose) sdkLog.toWriter((text) => display.line(text));
    else sdkLog.toFile(path.join(logs, 'worker.log'), 'imagebatch demo');
    /** The last line: what the worker logged, when it logged warnings. */
    const warnings = () => {
      const line = sdkLog.summary();
      if (line) write(`${line}\n`);
    };
    let res: DemoResult;
    try {
      res = await demo({
        home,
        log: (line) => display.line(line),
        signal,
        env,
        onProgress: (p, totalRows) => display.update(p, totalRows),
        onServerOutput: opts.verbose ? (text) => display.line(text) : (text) => appendFileSync(serverLog, text),
      });
    } catch (err) {
      display.end();
      warnings();
      throw err;
    }
    display.end();
    if (opts.json) {
      stdout(`${JSON.stringify(res, null, 2)}\n`);
      warnings();
      return;
    }
    stdout(`${demoSummary(res, opts.verbose ? undefined : logs).join('\n')}\n`);
    warnings();
  },
});

/**
 * The demo's summary once it has ended: only what still works then. No Web UI link (the dev server stopped with the
 * demo; `--json` keeps the address it had); `logs`, the folder of the logs when they went to files.
 */
export function demoSummary(res: DemoResult, logs: string | undefined): string[] {
  const c = res.progress.counts;
  return [
    `Batch "${res.batchId}" ${res.progress.status}: ${c.succeeded} succeeded, ` +
      `${c.reused ? `${c.reused} reused (paid before), ` : ''}${c.images_unsaved} images unsaved, ` +
      `${c.failed} failed, ${c.unknown} unknown, ${c.cancelled} cancelled, ${c.not_run} not run; ` +
      `${spendText(res.progress)} (refunded $${res.progress.refundedUsd.toFixed(2)}).`,
    `Gallery:  ${res.galleryUrl}`,
    `Results:  ${res.results.resultsCsv}`,
    `          ${res.results.resultsJsonl}`,
    ...resultFilesSummary(res.batchId, res.results),
    ...(logs ? [`Logs:     ${logs} (worker.log: the worker's retries and warnings; dev-server.log)`] : []),
  ];
}
