import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { SimulatorConfigInput } from '../../src/simulator';
import type { DevServer } from '../../src/temporal/dev-server';
import type { BatchProgress } from '../../src/model';
import { type Child, startCli, startDevServer, startWorker } from './processes';
import { ProcWatch } from './proc';
import { SimHost } from './simulator';

/** Options of {@link Stack.start}. */
export interface StackOptions {
  /** Names the temporary folder. */
  name: string;
  sim: SimulatorConfigInput;
  /**
   * Count the simulator's answers through a proxy.
   * @default true
   */
  count?: boolean;
  /** Worker settings (IMAGEBATCH_*, IMAGEGEN_*). */
  workerEnv?: Record<string, string>;
  /** Settings of `imagebatch run` (IMAGEBATCH_*) on top of the address, queue and store. @default none */
  cliEnv?: Record<string, string>;
  /** Node flags of the worker, such as `--cpu-prof`. */
  workerNodeArgs?: string[];
  /**
   * Keep the dev server's state in a SQLite file (as the demo does) rather than in memory.
   * @default true
   */
  dbFile?: boolean;
  /** SQLite pragmas of the dev server (file only). @default TUNED_SQLITE_PRAGMAS */
  pragmas?: Record<string, string>;
  /** Dynamic config of the dev server. @default none */
  dynamicConfig?: Record<string, unknown>;
}

/** Process names in the {@link ProcWatch}. */
export const Proc = { Worker: 'worker', Server: 'dev server', Sim: 'simulator', Cli: 'CLI' } as const;

/** What one CLI `run --follow` gave. */
export interface BatchRun {
  progress: BatchProgress;
  seconds: number;
  startedAt: number;
  endedAt: number;
  cliPeakRssMb: number;
  cliCpuSeconds: number;
}

/**
 * The whole system of one benchmark: the dev server, the simulator host and the product's worker, each a process
 * of its own watched for CPU and memory, in a temporary folder that {@link close} removes.
 */
export class Stack {
  readonly watch = new ProcWatch();
  readonly taskQueue = `bench-${randomUUID().slice(0, 8)}`;
  worker: Child | undefined;
  client: Client | undefined;
  private connection: Connection | undefined;

  private constructor(
    readonly options: StackOptions,
    readonly dir: string,
    readonly server: DevServer,
    readonly sim: SimHost,
  ) {
    this.watch.watch(Proc.Server, server.pid);
    this.watch.watch(Proc.Sim, sim.pid);
  }

  static async start(options: StackOptions): Promise<Stack> {
    const dir = await mkdtemp(path.join(os.tmpdir(), `imagebatch-bench-${options.name}-`));
    const server = await startDevServer({
      dbFile: options.dbFile === false ? undefined : path.join(dir, 'temporal.sqlite'),
      ...(options.pragmas ? { pragmas: options.pragmas } : {}),
      ...(options.dynamicConfig ? { dynamicConfig: options.dynamicConfig } : {}),
    });
    let sim: SimHost;
    try {
      sim = await SimHost.start({ sim: options.sim, count: options.count ?? true });
    } catch (err) {
      await server.stop();
      throw err;
    }
    const stack = new Stack(options, dir, server, sim);
    try {
      stack.connection = await Connection.connect({ address: server.address });
      stack.client = new Client({ connection: stack.connection });
      await stack.startWorker();
    } catch (err) {
      await stack.close();
      throw err;
    }
    return stack;
  }

  /** Starts (or starts again) the worker; resolves once it polls. */
  async startWorker(nodeArgs = this.options.workerNodeArgs): Promise<Child> {
    this.worker = await startWorker({
      temporalAddress: this.server.address,
      taskQueue: this.taskQueue,
      baseUrl: this.sim.baseUrl,
      outputRoot: this.dir,
      ...(this.options.workerEnv ? { env: this.options.workerEnv } : {}),
      ...(nodeArgs ? { nodeArgs } : {}),
    });
    this.watch.watch(Proc.Worker, this.worker.pid);
    return this.worker;
  }

  /** Starts `imagebatch run <file> --follow --json` without waiting for it. */
  startRun(file: string, batchId: string, concurrency: number | undefined): Child {
    // --allow-partial: a run whose rows the faults failed is measured too (it exits 0 unless none succeeded);
    // no concurrency: the adaptive window's defaults.
    const window = concurrency === undefined ? [] : ['--concurrency', String(concurrency)];
    const cli = startCli(
      ['run', file, '--batch-id', batchId, '--out', 'out', ...window, '--allow-partial', '--follow', '--json'],
      {
        temporalAddress: this.server.address,
        taskQueue: this.taskQueue,
        cwd: this.dir,
        ...(this.options.cliEnv ? { env: this.options.cliEnv } : {}),
      },
    );
    this.watch.watch(Proc.Cli, cli.pid);
    return cli;
  }

  /** Waits for a run started by {@link startRun}; throws with its output unless it printed the final progress. */
  async finishRun(cli: Child, timeoutMs: number): Promise<BatchRun> {
    const timer = setTimeout(() => void cli.kill(), timeoutMs);
    const { code } = await cli.exited.finally(() => clearTimeout(timer));
    const endedAt = Date.now();
    const line = cli
      .output()
      .split('\n')
      .reverse()
      .find((l) => l.startsWith('{'));
    if (code !== 0 || !line) {
      throw new Error(`imagebatch run exited with ${code}:\n${cli.output()}\nworker:\n${this.worker?.output() ?? ''}`);
    }
    return {
      progress: JSON.parse(line) as BatchProgress,
      seconds: (endedAt - cli.startedAt) / 1000,
      startedAt: cli.startedAt,
      endedAt,
      cliPeakRssMb: this.watch.peakRssMb(Proc.Cli),
      cliCpuSeconds: this.watch.cpu(Proc.Cli),
    };
  }

  /** `imagebatch run` from start to end. */
  async runBatch(file: string, batchId: string, concurrency: number | undefined, timeoutMs: number): Promise<BatchRun> {
    return this.finishRun(this.startRun(file, batchId, concurrency), timeoutMs);
  }

  async close(): Promise<void> {
    this.watch.stop();
    await this.worker?.stop().catch(() => undefined);
    await this.connection?.close().catch(() => undefined);
    await this.sim.close().catch(() => undefined);
    await this.server.stop().catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }
}
