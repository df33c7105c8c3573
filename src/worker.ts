import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from './activities';
import { metricsInterceptor, type WorkerMetrics } from './metrics';

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
  activityDeps?: ActivityDeps;
  /**
   * A prebuilt workflow bundle (tests bundle once per file to save time).
   * @default the built worker's cached bundle ({@link cachedWorkflowBundle}), else bundled from
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
   * passes {@link SHUTDOWN_GRACE_MS}).
   * @default 0, the SDK's: cancelled at once, to be retried by another worker
   */
  shutdownGraceTimeMs?: number;
}

/**
 * The CLI worker's shutdown grace: an activity sends at most one request, so a few seconds let the ones in flight
 * finish, and 8 s fits inside Docker's default 10 s between SIGTERM and SIGKILL.
 */
export const SHUTDOWN_GRACE_MS = 8_000;

/** Creates (does not run) a worker with imagebatch's workflows and activities. */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const workflowBundle =
    options.workflowBundle ??
    (options.interceptors?.workflowModules?.length ? undefined : await cachedWorkflowBundle(options.dataConverter));
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? TASK_QUEUE,
    activities: createActivities(options.activityDeps),
    ...(workflowBundle ? { workflowBundle } : { workflowsPath }),
    ...(options.maxTaskQueueActivitiesPerSecond
      ? { maxTaskQueueActivitiesPerSecond: options.maxTaskQueueActivitiesPerSecond }
      : {}),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 100,
    ...interceptorsOf(options),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.shutdownGraceTimeMs !== undefined ? { shutdownGraceTime: options.shutdownGraceTimeMs } : {}),
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
}

/** The caller's interceptors, plus the metrics interceptor when metrics are on. */
function interceptorsOf(options: CreateWorkerOptions): Pick<WorkerOptions, 'interceptors'> {
  if (!options.metrics) return options.interceptors ? { interceptors: options.interceptors } : {};
  const given = options.interceptors ?? {};
  return { interceptors: { ...given, activity: [...(given.activity ?? []), metricsInterceptor(options.metrics)] } };
}

const BUNDLE_PREFIX = '.workflow-bundle-';

/** Run by `node -e` in a child process: webpack's memory stays out of the worker. */
const BUNDLE_SCRIPT = `
const { writeFileSync, renameSync } = require('node:fs');
const o = JSON.parse(process.argv[1]);
const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error };
require(o.sdk).bundleWorkflowCode({ ...o.bundle, logger: quiet }).then((b) => {
  writeFileSync(o.out + '.' + process.pid, b.code);
  renameSync(o.out + '.' + process.pid, o.out);
});
`;

/**
 * The built worker's workflow bundle, made once per build and kept beside it (`dist/.workflow-bundle-<hash>.js`):
 * a worker that starts, or starts again after a crash, skips webpack, which costs seconds and leaves the worker
 * about 80 MB larger for good (measured in BENCHMARKS.md). The hash covers every file of the build, the SDK and the
 * converter paths, so any change makes a new bundle; webpack runs in a child process. Undefined (bundle at start,
 * as before) when running from `src/` or when `dist/` cannot be written.
 */
export async function cachedWorkflowBundle(
  dataConverter?: WorkerOptions['dataConverter'],
): Promise<{ codePath: string } | undefined> {
  if (path.basename(__dirname) !== 'dist') return undefined;
  try {
    const sdk = require.resolve('@temporalio/worker');
    const bundle = {
      workflowsPath,
      payloadConverterPath: dataConverter?.payloadConverterPath,
      failureConverterPath: dataConverter?.failureConverterPath,
    };
    const hash = createHash('sha256').update(JSON.stringify(bundle));
    hash.update(await readFile(path.join(path.dirname(sdk), '..', 'package.json')));
    const files = (await readdir(__dirname, { recursive: true })).filter(
      (f) => f.endsWith('.js') && !path.basename(f).startsWith('.'),
    );
    for (const file of files.sort()) hash.update(file).update(await readFile(path.join(__dirname, file)));
    const name = `${BUNDLE_PREFIX}${hash.digest('hex').slice(0, 16)}.js`;
    const codePath = path.join(__dirname, name);
    const cached = await access(codePath).then(
      () => true,
      () => false,
    );
    if (!cached) {
      const out = { sdk, bundle, out: codePath };
      await promisify(execFile)(process.execPath, ['-e', BUNDLE_SCRIPT, JSON.stringify(out)], { timeout: 300_000 });
      for (const old of await readdir(__dirname)) {
        if (old.startsWith(BUNDLE_PREFIX) && old !== name) await rm(path.join(__dirname, old), { force: true });
      }
    }
    return { codePath };
  } catch {
    return undefined;
  }
}
