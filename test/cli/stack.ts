import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEMO_API_KEY, startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { parseIdempotencyKey } from '../../src/model';
import { WorkerProcess, baseEnv, ensureDistIsFresh } from './helpers';

/**
 * What the CLI tests run against: the pinned Temporal dev server (in memory, loopback, no UI), the simulator
 * in this process, and `imagebatch worker` as a child process configured from its environment only.
 */
export interface CliStack {
  server: DevServer;
  sim: Simulator;
  worker: WorkerProcess;
  /** A fresh temporary folder for batch files and outputs; removed by `stop()`. */
  dir: string;
  /** The environment of CLI commands: Temporal settings only (the API key lives in the worker's). */
  cliEnv: Record<string, string>;
  /** Stops the worker and starts another on the same server and simulator, with these IMAGEGEN_* settings added. */
  restartWorker(extraEnv?: Record<string, string>): Promise<WorkerProcess>;
  stop(): Promise<void>;
}

/** Starts the stack; everything already started is stopped again when a later step fails. */
export async function startStack(options: {
  simulator: SimulatorConfigInput;
  /** The worker's IMAGEGEN_MIN_POLL_INTERVAL_MS. */
  minPollIntervalMs: number;
  taskQueue?: string;
  /** More settings of the worker (IMAGEGEN_*). */
  workerEnv?: Record<string, string>;
}): Promise<CliStack> {
  await ensureDistIsFresh();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cli-'));
  let server: DevServer | undefined;
  let sim: Simulator | undefined;
  let worker: WorkerProcess | undefined;
  const stop = async () => {
    await worker?.stop();
    await sim?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    [server, sim] = await Promise.all([
      DevServer.start({ ...devServerBase(), uiPort: false }),
      startSimulator(options.simulator),
    ]);
    const temporal = { TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: options.taskQueue ?? 'imagebatch-cli' };
    const workerEnv = (extra: Record<string, string>) =>
      baseEnv({
        ...temporal,
        IMAGEGEN_BASE_URL: sim!.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: String(options.minPollIntervalMs),
        ...extra,
      });
    worker = await WorkerProcess.start({ env: workerEnv(options.workerEnv ?? {}) });
    const stack: CliStack = {
      server,
      sim,
      worker,
      dir,
      cliEnv: baseEnv(temporal),
      stop,
      restartWorker: async (extraEnv = {}) => {
        await worker?.stop();
        worker = await WorkerProcess.start({ env: workerEnv(extraEnv) });
        stack.worker = worker;
        return worker;
      },
    };
    return stack;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Idempotency keys the simulator charged for batch `batchId` (`ib/<batch>/<row>/a<n>`), one per charge. */
export function chargedKeys(sim: Simulator, batchId: string): string[] {
  return sim.charges
    .entries()
    .filter((e) => e.kind === 'charge' && parseIdempotencyKey(e.idempotencyKey ?? '')?.batchId === batchId)
    .map((e) => e.idempotencyKey!);
}

/** The row id inside an idempotency key `ib/<batch>/<row>/a<n>`. */
export function rowOfKey(batchId: string, key: string): string {
  const parsed = parseIdempotencyKey(key);
  return parsed?.batchId === batchId ? parsed.rowId : '';
}
