import os from 'node:os';
import type { Client } from '@temporalio/client';
import type { Timestamp } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { z } from 'zod';
import { connectClient } from '../client';
import { defineCommand } from '../command';
import { ExitCode } from '../errors';

/** Options of {@link workerHealth}. */
export interface WorkerHealthOptions {
  client: Client;
  namespace: string;
  taskQueue: string;
  /**
   * The host whose worker is checked: a worker's default identity is `<pid>@<hostname>`.
   * @default os.hostname() (in a container: the container's own worker)
   */
  hostname?: string;
  /**
   * A poll older than this does not count. A worker renews its long polls at least every minute or so.
   * @default 150_000
   */
  maxPollAgeMs?: number;
  /**
   * The time now (tests pass their own).
   * @default Date.now
   */
  now?: () => number;
}

/** Whether a worker of this host polls its task queue, and why not when it does not. */
export interface WorkerHealth {
  healthy: boolean;
  /** One line for a person reading `docker inspect`. */
  detail: string;
}

const QUEUE_TYPES = [
  ['workflow', temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW],
  ['activity', temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY],
] as const;

/**
 * `imagebatch healthcheck`, the worker container's health check. A live process is not enough: a worker that lost
 * its connection, or never got its workflow bundle built, runs on without polling. So this asks the Temporal
 * server whether a poller of this host has taken workflow and activity tasks from the queue lately.
 */
export async function workerHealth(options: WorkerHealthOptions): Promise<WorkerHealth> {
  const hostname = options.hostname ?? os.hostname();
  const maxAge = options.maxPollAgeMs ?? 150_000;
  const now = (options.now ?? Date.now)();
  const missing: string[] = [];
  for (const [name, taskQueueType] of QUEUE_TYPES) {
    const { pollers } = await options.client.workflowService.describeTaskQueue({
      namespace: options.namespace,
      taskQueue: { name: options.taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType,
    });
    const ours = (pollers ?? []).filter((p) => p.identity?.endsWith(`@${hostname}`));
    const recent = ours.some((p) => now - timestampMs(p.lastAccessTime) <= maxAge);
    if (!recent) missing.push(`${name} tasks (${ours.length === 0 ? 'no poller of this host' : 'last poll too old'})`);
  }
  const where = `task queue ${options.taskQueue} (namespace ${options.namespace}) on host ${hostname}`;
  return missing.length === 0
    ? { healthy: true, detail: `a worker polls ${where}` }
    : { healthy: false, detail: `no worker polls ${where} for ${missing.join(' and ')}` };
}

/** Milliseconds since the epoch of a protobuf timestamp; 0 when there is none. */
function timestampMs(ts: Timestamp | null | undefined): number {
  const seconds = ts?.seconds ?? 0;
  return (typeof seconds === 'number' ? seconds : seconds.toNumber()) * 1000 + Math.floor((ts?.nanos ?? 0) / 1e6);
}

/** `imagebatch healthcheck`: exit 0 when this host's worker polls its task queue, 1 when not. */
export const healthcheckCommand = defineCommand({
  name: 'healthcheck',
  description: "Exit 0 when this host's worker polls its task queue (the container health check)",
  // The container runs it, not a person: out of `imagebatch --help`, which fits one screen.
  hidden: true,
  schema: z.object({}),
  async run(_opts, { stderr, env }) {
    const { client, config, close } = await connectClient(env);
    try {
      const health = await workerHealth({ client, namespace: config.namespace, taskQueue: config.taskQueue });
      stderr(`${health.detail}\n`);
      return health.healthy ? ExitCode.Ok : ExitCode.Failure;
    } finally {
      await close();
    }
  },
});
