import { temporal } from '@temporalio/proto';
import type { Client } from '@temporalio/client';
import { checkWorkerSettings } from '../../config/worker-settings';
import { ensureLocal } from '../../local/local';
import { connectClient, localOptions, type ConnectedClient } from '../client';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Local mode keeps schedules alive (issue 33): a schedule command that finds no local worker starts it, as
 * `imagebatch run` does; where it cannot (the worker's settings are not in this shell) or where Temporal is not local,
 * it says plainly that no worker runs, so no run starts, and what starts one.
 */

/** A worker that polled the task queue this recently runs (a poll waits up to a minute on the server). */
export const POLLER_FRESH_MS = 90_000;

/** The command that starts the local worker on its own. */
export const LOCAL_START_COMMAND = 'imagebatch local start';

/**
 * Runs `fn` with a client (local mode: the home's server). When `fn` says a schedule needs runs (one is active, or
 * it was triggered or unpaused), makes sure a worker runs for them, or writes through `stderr` why none does.
 */
export async function withScheduleClient(
  env: Env,
  stderr: (text: string) => void,
  fn: (client: Client) => Promise<boolean>,
): Promise<void> {
  const log = (line: string) => stderr(`${line}\n`);
  const connected = await connectClient(env, { log });
  try {
    if (!(await fn(connected.client))) return;
    const missing = await workerMissing(connected, env, log);
    if (missing) log(`imagebatch: ${missing}`);
  } finally {
    await connected.close();
  }
}

/** Why no worker runs the schedules' runs, or undefined when one does (started now if local mode could). */
export async function workerMissing(
  connected: ConnectedClient,
  env: Env,
  log: (line: string) => void,
): Promise<string | undefined> {
  const { local, client, config } = connected;
  if (!local) {
    if (await workerPolls(client, config.namespace, config.taskQueue)) return undefined;
    return (
      `no worker polls task queue ${config.taskQueue}, so no scheduled run starts (ticks are skipped); ` +
      'start one with `imagebatch worker` (docs/using.md)'
    );
  }
  if (local.worker) return undefined;
  const noWorker = 'no local worker runs, so no scheduled run starts (ticks are skipped)';
  try {
    // The worker's settings, checked as `run` checks them: without them it cannot start.
    checkWorkerSettings(env);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return `${noWorker}: ${why}; start it with \`${LOCAL_START_COMMAND}\` with the worker's settings in the environment`;
  }
  try {
    await ensureLocal(localOptions(env, 'worker', log));
    return undefined;
  } catch (err) {
    return `${noWorker}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/** Whether a worker has polled the task queue's workflow tasks within {@link POLLER_FRESH_MS}. */
async function workerPolls(client: Client, namespace: string, taskQueue: string): Promise<boolean> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  const since = Date.now() - POLLER_FRESH_MS;
  return (pollers ?? []).some((p) => Number(p.lastAccessTime?.seconds ?? 0) * 1000 >= since);
}
