import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from './activities';
import { failureConverterPath } from './codec';
import { metricsInterceptor, type WorkerMetrics } from './metrics';
import { runResultsWriter } from './results';

/** The task queue every imagebatch worker polls. */
export const TASK_QUEUE = 'imagebatch';

/** Path of the workflow code that the worker bundles (`src/workflows` or `dist/workflows`). */
export const workflowsPath = path.join(__dirname, 'workflows');

/** Options of {@link createWorker}. */
export interface CreateWorkerOptions {
  /** An open connection to the Temporal server. */
  connection: NativeConnection;
  /**
   * Temporal namespace.
   * @default 'default'
   */
  namespace?: string;
  /**
   * Task queue to poll.
   * @default TASK_QUEUE
   */
  taskQueue?: string;
  /**
   * Dependencies handed to the activities.
   * @default {}
   */
  activityDeps: ActivityDeps;
  /**
   * Activities registered beside imagebatch's own, under their keys (tests register their probes this way).
   * @default none
   */
  extraActivities?: WorkerOptions['activities'];
  /**
   * A prebuilt workflow bundle (tests bundle once per file to save time).
   * @default the build's bundle for this `dataConverter` ({@link prebuiltWorkflowBundle}), else bundled from
   * {@link workflowsPath} at start
   */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /**
   * Activity tasks per second for the whole task queue, across all its workers (enforced by the Temporal
   * server): set it to the image service's per-key request rate. One activity attempt sends at most one request.
   * @default no limit
   */
  maxTaskQueueActivitiesPerSecond?: number;
  /**
   * Activities this worker runs at once.
   * @default 100
   */
  maxConcurrentActivityTaskExecutions?: number;
  /** Worker interceptors (tests sync a skipped-time clock this way). */
  interceptors?: WorkerOptions['interceptors'];
  /**
   * Payload codecs and converters, such as `workerDataConverter(codec)` from `src/codec` to encrypt every payload.
   * With a prebuilt `workflowBundle`, the bundle must have been built with the same `failureConverterPath`.
   * @default Temporal's default converters, no codec
   */
  dataConverter?: WorkerOptions['dataConverter'];
  /**
   * Counts every activity attempt into these metrics (requests, charges, refunds, 429s, retries).
   * @default no metrics
   */
  metrics?: WorkerMetrics;
  /**
   * The worker's identity in histories (tests tell workers apart by it).
   * @default Temporal's `<pid>@<hostname>`
   */
  identity?: string;
  /**
   * Milliseconds a shutdown waits for the activities in flight to finish before cancelling them (the CLI worker
   * passes `IMAGEBATCH_SHUTDOWN_GRACE`: `TemporalConfig.shutdownGraceMs`).
   * @default 0, the SDK's: cancelled at once, to be retried by another worker
   */
  shutdownGraceTimeMs?: number;
  /**
   * Workflows kept cached between their tasks (Temporal's sticky cache); an evicted workflow is replayed from its
   * history at its next task, and 0 turns the cache off (the CLI worker passes `IMAGEBATCH_MAX_CACHED_WORKFLOWS`:
   * `TemporalConfig.maxCachedWorkflows`). At least the workflows that run at once (every batch and its window of rows)
   * should fit, or they are replayed at every task. Rows leave the cache as they complete, so a smaller cache does not
   * make the worker smaller (BENCHMARKS.md, "Worker memory").
   * @default the SDK's, which grows with the heap limit (about 2,300 with Node's default 4 GB heap)
   */
  maxCachedWorkflows?: number;
}

/** Creates (does not run) a worker with imagebatch's workflows and activities. */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const workflowBundle =
    options.workflowBundle ??
    (options.interceptors?.workflowModules?.length ? undefined : prebuiltWorkflowBundle(options.dataConverter));
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? TASK_QUEUE,
    activities: {
      ...options.extraActivities,
      ...createActivities({
        taskQueueRateLimited: Boolean(options.maxTaskQueueActivitiesPerSecond),
        ...withResultsWriter(options.activityDeps),
      }),
    },
    ...(workflowBundle ? { workflowBundle } : { workflowsPath }),
    ...(options.maxTaskQueueActivitiesPerSecond
      ? { maxTaskQueueActivitiesPerSecond: options.maxTaskQueueActivitiesPerSecond }
      : {}),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 100,
    ...interceptorsOf(options),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.shutdownGraceTimeMs !== undefined ? { shutdownGraceTime: options.shutdownGraceTimeMs } : {}),
    ...(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
}

/** The activities' dependencies, with the writer of a scheduled run's result files when a client is given. */
export function withResultsWriter(deps: ActivityDeps): ActivityDeps {
  if (deps.writeResults || !deps.temporalClient) return deps;
  return { ...deps, writeResults: runResultsWriter({ client: deps.temporalClient, ledger: deps.ledger }) };
}

/** The caller's interceptors, plus the metrics interceptor when metrics are on. */
function interceptorsOf(options: CreateWorkerOptions): Pick<WorkerOptions, 'interceptors'> {
  if (!options.metrics) return options.interceptors ? { interceptors: options.interceptors } : {};
  const given = options.interceptors ?? {};
  return { interceptors: { ...given, activity: [...(given.activity ?? []), metricsInterceptor(options.metrics)] } };
}

/**
 * The workflow bundles `npm run build` makes in dist/ (scripts/bundle-workflows.mjs), so that a worker that starts,
 * or starts again after a crash, skips webpack, which costs seconds and leaves the worker about 80 MB larger for
 * good (BENCHMARKS.md). One per data converter the CLI worker runs with, since a bundle holds its failure converter:
 * an encrypting worker (`workerDataConverter`, src/codec) given the plain bundle would write failure texts in clear.
 */
export const WORKFLOW_BUNDLES: readonly WorkflowBundleVariant[] = [
  { file: 'workflow-bundle.js' },
  { file: 'workflow-bundle-encrypted.js', failureConverterPath },
];

/** One prebuilt workflow bundle. */
export interface WorkflowBundleVariant {
  /** Its file in dist/. */
  file: string;
  /**
   * The `failureConverterPath` it is bundled with, and that a worker's `dataConverter` must have to use it.
   * @default none: Temporal's default failure converter
   */
  failureConverterPath?: string;
}

/** What the bundles of a build were made from; written beside them as {@link BUNDLE_MANIFEST}. */
export interface BundleManifest {
  /** Version of `@temporalio/workflow`, which each bundle holds. */
  sdk: string;
  /** {@link WorkflowBundleVariant.file} of each bundle, in {@link WORKFLOW_BUNDLES} order. */
  bundles: string[];
  /**
   * SHA-256 of each file the bundles were made from, by its path relative to dist/: the built workflow code and its
   * source maps, and the sources they quote (`../src/…`, which a production image does not have).
   */
  inputs: Record<string, string>;
}

/** The manifest's file in dist/. */
export const BUNDLE_MANIFEST = 'workflow-bundles.json';

/** The manifest of bundles in `dir` made from `inputs` (absolute paths; the packages' are left to `sdk`). */
export function bundleManifest(dir: string, inputs: Iterable<string>): BundleManifest {
  const files = [...inputs]
    .filter((f) => !f.split(path.sep).includes('node_modules'))
    .map((f) => path.relative(dir, f));
  return {
    sdk: sdkVersion(),
    bundles: WORKFLOW_BUNDLES.map((b) => b.file),
    inputs: Object.fromEntries(files.sort().map((f) => [f, sha256(readFileSync(path.join(dir, f)))])),
  };
}

/**
 * Whether the bundles in `dir` were made by this build: the same SDK, the same variants, and every file of `dir`
 * they hold unchanged (a build that ran `tsc` alone leaves bundles of the old code). `withSources`: the sources
 * outside `dir` too (the build checks them; a worker does not, as a production image has none).
 */
export function bundlesAreFresh(dir: string, withSources = false): boolean {
  try {
    const manifest = JSON.parse(readFileSync(path.join(dir, BUNDLE_MANIFEST), 'utf8')) as BundleManifest;
    return (
      manifest.sdk === sdkVersion() &&
      manifest.bundles.join() === WORKFLOW_BUNDLES.map((b) => b.file).join() &&
      Object.entries(manifest.inputs).every(
        ([f, hash]) => (!withSources && f.startsWith('..')) || sha256(readFileSync(path.join(dir, f))) === hash,
      )
    );
  } catch {
    return false;
  }
}

/**
 * The build's workflow bundle for a worker with this `dataConverter`, or undefined, and the worker bundles
 * {@link workflowsPath} at start: when running from `src/` (tsx, vitest), with a converter no bundle was made for,
 * or when the bundles are not this build's ({@link bundlesAreFresh}).
 */
export function prebuiltWorkflowBundle(
  dataConverter?: WorkerOptions['dataConverter'],
): { codePath: string } | undefined {
  if (path.basename(__dirname) !== 'dist' || dataConverter?.payloadConverterPath !== undefined) return undefined;
  const variant = WORKFLOW_BUNDLES.find((b) => b.failureConverterPath === dataConverter?.failureConverterPath);
  return variant && bundlesAreFresh(__dirname) ? { codePath: path.join(__dirname, variant.file) } : undefined;
}

function sdkVersion(): string {
  const pkg = path.join(path.dirname(require.resolve('@temporalio/workflow')), '..', 'package.json');
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}
