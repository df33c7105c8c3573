import path from 'node:path';
import { DefaultLogger, NativeConnection } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { lazyApiKeyProvider } from '../../api/api-key';
import { loadApiKey } from '../../config/api-key';
import { checkKnownSettings } from '../../config/known-settings';
import { loadLogLevel } from '../../config/log-level';
import { clientDataConverter, payloadCodecsFromEnv, workerDataConverter } from '../../codec';
import { loadMetricsConfig } from '../../config/metrics-config';
import { loadServiceConfig } from '../../config/service-config';
import { connectionOptions, loadTemporalConfig } from '../../config/temporal-config';
import { installWorkerRuntime, WorkerMetrics } from '../../metrics';
import { ledgerLocation, openKnownLedgerStore, rememberLedgerStore } from '../../ledger';
import { createWorker, prebuiltWorkflowBundle } from '../../worker';
import { z } from 'zod';
import { defineCommand } from '../command';

/** What the worker logs when it bundles its workflow code at start (scripts/check-artifact.mjs checks its absence). */
export const BUNDLING_AT_START = 'bundling the workflow code at start (`npm run build` makes the bundles)';

/** How often a running worker records the keys its store holds (src/ledger/known-stores.ts). */
const REMEMBER_EVERY_MS = 60_000;

/** Options of {@link runWorker}. */
export interface RunWorkerOptions {
  /** Where the settings come from (the API key too, and only from here). */
  env: Readonly<Record<string, string | undefined>>;
  /** Aborted on SIGINT/SIGTERM: the worker stops polling, finishes what it runs, and returns. */
  signal: AbortSignal;
  log: (line: string) => void;
  /**
   * Folder that relative batch output folders are resolved against.
   * @default process.cwd()
   */
  outputRoot?: string;
  /**
   * Called when the worker starts to poll (local mode writes its worker.json then).
   * @default none
   */
  onReady?: (summary: WorkerRunSummary) => void;
}

export interface WorkerRunSummary {
  address: string;
  namespace: string;
  taskQueue: string;
  /** How long a stopping worker lets its activities finish (`IMAGEBATCH_SHUTDOWN_GRACE`). */
  shutdownGraceMs: number;
}

/**
 * `imagebatch worker`: the long-running worker for a Temporal cluster. Every setting is checked before it
 * connects (the API key's format too, without printing it), so a wrong one, or a variable of ours that is no
 * setting, stops it at once with its name.
 */
export async function runWorker(options: RunWorkerOptions): Promise<WorkerRunSummary> {
  checkKnownSettings(options.env);
  const temporal = loadTemporalConfig(options.env);
  const service = loadServiceConfig(options.env);
  const apiKey = loadApiKey(options.env);
  const codecs = payloadCodecsFromEnv(options.env);
  const metricsConfig = loadMetricsConfig(options.env);
  // Checked with the other settings, before anything connects.
  ledgerLocation(options.env);
  const logLevel = loadLogLevel(options.env);
  // Before the first NativeConnection: the Prometheus exporter is chosen when the runtime is created.
  const runtime = installWorkerRuntime({
    logger: new DefaultLogger(logLevel),
    ...(metricsConfig ? { metrics: metricsConfig } : {}),
  });
  // The store of what was paid, reached before anything else connects: a worker without it sends nothing, and a
  // worker on a store that replaced the one this user used (missing, emptied, another) does not start.
  const ledger = await openKnownLedgerStore(options.env);
  // While it runs, the record of stores learns the keys it adds (a store deleted later is then missed).
  const remembering = setInterval(() => void rememberLedgerStore(options.env, ledger), REMEMBER_EVERY_MS).unref();
  const dataConverter = workerDataConverter(codecs);
  // The build's bundle (the image makes it at build time); without one the worker runs webpack now, which costs
  // seconds and memory at every start: said, so that a build that lost its bundles shows.
  const workflowBundle = prebuiltWorkflowBundle(dataConverter);
  if (!workflowBundle) options.log(`no prebuilt workflow bundle for this build: ${BUNDLING_AT_START}`);
  let connection: NativeConnection | undefined;
  let clientConnection: Connection | undefined;
  try {
    connection = await NativeConnection.connect(connectionOptions(temporal));
    clientConnection = await Connection.connect(connectionOptions(temporal));
    const worker = await createWorker({
      ...(workflowBundle ? { workflowBundle } : {}),
      connection,
      namespace: temporal.namespace,
      taskQueue: temporal.taskQueue,
      maxConcurrentActivityTaskExecutions: temporal.maxConcurrentActivities,
      shutdownGraceTimeMs: temporal.shutdownGraceMs,
      ...(temporal.maxCachedWorkflows === undefined ? {} : { maxCachedWorkflows: temporal.maxCachedWorkflows }),
      ...(temporal.ratePerSecond > 0 ? { maxTaskQueueActivitiesPerSecond: temporal.ratePerSecond } : {}),
      dataConverter,
      ...(metricsConfig
        ? {
            metrics: new WorkerMetrics(
              runtime.metricMeter.withTags({ namespace: temporal.namespace, task_queue: temporal.taskQueue }),
            ),
          }
        : {}),
      activityDeps: {
        config: service,
        apiKey: lazyApiKeyProvider(() => apiKey),
        temporalClient: new Client({
          connection: clientConnection,
          namespace: temporal.namespace,
          dataConverter: clientDataConverter(codecs),
        }),
        ...(options.outputRoot ? { outputRoot: options.outputRoot } : {}),
        ledger,
      },
    });
    const onAbort = () => worker.shutdown();
    if (options.signal.aborted) onAbort();
    else options.signal.addEventListener('abort', onAbort, { once: true });
    options.log(
      `worker polling ${temporal.taskQueue} on ${temporal.address} (namespace ${temporal.namespace}` +
        `${temporal.ratePerSecond > 0 ? `, ${temporal.ratePerSecond} activities/s for the whole queue` : ''}` +
        `${codecs.encryption ? `, payloads encrypted with key id ${codecs.encryption.keyId}` : ''}` +
        `${metricsConfig ? `, metrics on http://${metricsConfig.bindAddress}/metrics` : ''}; ledger store ` +
        `${ledger.location})`,
    );
    const summary = {
      address: temporal.address,
      namespace: temporal.namespace,
      taskQueue: temporal.taskQueue,
      shutdownGraceMs: temporal.shutdownGraceMs,
    };
    // The worker is made (connected, its workflow code loaded); run() polls at once.
    const running = worker.run();
    options.onReady?.(summary);
    await running;
    return summary;
  } finally {
    await clientConnection?.close();
    await connection?.close();
    clearInterval(remembering);
    await rememberLedgerStore(options.env, ledger);
    await ledger.close();
  }
}

/** `imagebatch worker`: runs until SIGINT/SIGTERM. */
export const workerCommand = defineCommand({
  name: 'worker',
  // The settings are listed in docs/settings.md, not here: the help fits one screen.
  description: 'Run a worker for a Temporal cluster; settings from the environment only (docs/settings.md)',
  summary: 'Run a worker for a Temporal cluster',
  options: [
    { flags: '--output-root <dir>', description: 'folder that relative batch output folders are resolved against' },
  ],
  schema: z.object({ outputRoot: z.string().optional() }),
  async run(opts, { stderr, env, signal }) {
    await runWorker({
      env,
      signal,
      log: (line) => stderr(`${line}\n`),
      ...(opts.outputRoot ? { outputRoot: path.resolve(opts.outputRoot) } : {}),
    });
    stderr('worker stopped\n');
  },
});
