import { TestWorkflowEnvironment, type LocalTestWorkflowEnvironmentOptions } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll } from 'vitest';
import { loadToolchainOverrides } from '../../src/config/toolchain-config';
import { executableFor, temporalCliPath, testServerPath } from '../../src/temporal/toolchain';
import { withResultsWriter, workflowsPath } from '../../src/worker';
import { createActivities, type ActivityDeps } from '../../src/activities';
import { defaultServiceConfig } from '../../src/config/service-config';
import { type ServiceConfig } from '../../src/api/service-config';
import { DEMO_API_KEY } from '../../src/simulator';
import { refuseInUnitProject } from './project';
import { tempLedger } from './ledger';
import type { LedgerStore } from '../../src/ledger';

/**
 * Test environments on the project's pinned binaries (see scripts/setup.mjs). When a binary is missing the
 * SDK's own download is tried, which fails loudly where there is no internet: a missing server is an
 * error, never a skipped test.
 */

/** The time-skipping test server, on a free port. */
export function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  refuseInUnitProject('the Temporal test server');
  return TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: executableFor(testServerPath(loadToolchainOverrides().testServer)) },
  });
}

/** The dev server (`temporal server start-dev`), in memory, on a free loopback port. */
export function createLocalEnv(
  server: LocalTestWorkflowEnvironmentOptions['server'] = {},
): Promise<TestWorkflowEnvironment> {
  refuseInUnitProject('the Temporal dev server');
  return TestWorkflowEnvironment.createLocal({
    server: {
      executable: executableFor(temporalCliPath(loadToolchainOverrides().temporalCli)),
      ip: '127.0.0.1',
      ...server,
    },
  });
}

/**
 * Starts an environment before the file's tests and tears it down after them, whatever happens.
 * Returns a getter, since the environment exists only once `beforeAll` has run.
 */
export function useTestEnv(create: () => Promise<TestWorkflowEnvironment>): () => TestWorkflowEnvironment {
  let env: TestWorkflowEnvironment | undefined;
  beforeAll(async () => {
    env = await create();
  });
  afterAll(async () => {
    await env?.teardown();
  });
  return () => {
    if (!env) throw new Error('the Temporal test environment is not started (useTestEnv outside a test?)');
    return env;
  };
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflow bundle, built once per test file (bundling takes seconds). */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath, logger: quietBundlerLogger });
  return bundle;
}

const noop = () => undefined;
/** A bundler logger that prints errors only. */
export const quietBundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };

/**
 * A worker with the real activities against a simulator at `baseUrl` (the demo key, a 200 ms poll interval, schedule
 * sources read below `outputRoot`, and any other `config` given), on a task queue of its own named after `prefix`,
 * writing below `outputRoot`.
 */
export async function simulatorWorker(
  env: () => TestWorkflowEnvironment,
  options: {
    baseUrl: string;
    outputRoot: string;
    prefix: string;
    config?: Partial<ServiceConfig>;
    /** @default a store of its own */
    ledger?: LedgerStore;
    /** A queue to join (another worker's, stopped): @default a new one, named after `prefix` */
    taskQueue?: string;
    /** Further activity dependencies (a scheduled run's watch interval). @default none */
    activityDeps?: Partial<ActivityDeps>;
  },
): Promise<{ worker: Worker; taskQueue: string; ledger: LedgerStore }> {
  const taskQueue = options.taskQueue ?? `${options.prefix}-${randomUUID()}`;
  const ledger = options.ledger ?? (await tempLedger());
  const worker = await Worker.create({
    connection: env().nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities(
      withResultsWriter({
        config: defaultServiceConfig({
          baseUrl: options.baseUrl,
          minPollIntervalMs: 200,
          scheduleSources: [options.outputRoot],
          ...options.config,
        }),
        apiKey: () => DEMO_API_KEY,
        outputRoot: options.outputRoot,
        temporalClient: env().client,
        ledger,
        ...options.activityDeps,
      }),
    ),
  });
  return { worker, taskQueue, ledger };
}
