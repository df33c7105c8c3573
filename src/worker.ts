import path from 'node:path';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from './activities';

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
   * @default bundled from {@link workflowsPath} at start
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
}

/** Creates (does not run) a worker with imagebatch's workflows and activities. */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? TASK_QUEUE,
    activities: createActivities(options.activityDeps),
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath }),
    ...(options.maxTaskQueueActivitiesPerSecond
      ? { maxTaskQueueActivitiesPerSecond: options.maxTaskQueueActivitiesPerSecond }
      : {}),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 100,
    ...(options.interceptors ? { interceptors: options.interceptors } : {}),
  });
}
