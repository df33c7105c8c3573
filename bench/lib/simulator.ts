import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { FaultSettings, LimitsPatch, SimulatorConfigInput } from '../../src/simulator';
import type { SimCounters, SimHostReport, SimHostRequest, SimHostResponse } from './sim-protocol';

/** A request without its id (distributed over the union). */
type Unnumbered<T> = T extends unknown ? Omit<T, 'id'> : never;

/** Options of {@link SimHost.start}. */
export interface SimHostOptions {
  /** The simulator's configuration (JSON-able: it crosses a process boundary). */
  sim: SimulatorConfigInput;
  /**
   * Put a counting proxy in front of the API (statuses, 429 reasons, polls per creation). It costs the host
   * process some CPU per request, so the orchestration benchmark leaves it out.
   * @default true
   */
  count?: boolean;
}

/** A simulator running in its own process (bench/lib/sim-host.ts), driven over IPC. */
export class SimHost {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(
    private readonly child: ChildProcess,
    /** `{base_url}` for the clients: the counting proxy when there is one. */
    readonly baseUrl: string,
  ) {
    child.on('message', (msg: SimHostResponse) => {
      const w = this.waiting.get(msg.id);
      if (!w) return;
      this.waiting.delete(msg.id);
      if (msg.ok) w.resolve(msg.value);
      else w.reject(new Error(`simulator host: ${msg.error}`));
    });
    child.once('exit', (code) => {
      for (const w of this.waiting.values()) w.reject(new Error(`simulator host exited with code ${code}`));
      this.waiting.clear();
    });
  }

  static async start(options: SimHostOptions): Promise<SimHost> {
    const child = fork(path.join(__dirname, 'sim-host.ts'), [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, BENCH_SIM: JSON.stringify({ sim: options.sim, count: options.count ?? true }) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = await new Promise<SimHostResponse>((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`simulator host exited with code ${code} at start`)));
    });
    if (!ready.ok) throw new Error(ready.error);
    const { baseUrl } = ready.value as { baseUrl: string };
    return new SimHost(child, baseUrl);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  private call<T>(request: Unnumbered<SimHostRequest>): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ ...request, id });
    });
  }

  report(): Promise<SimHostReport> {
    return this.call({ op: 'report' });
  }

  setFaults(faults: Partial<FaultSettings>): Promise<void> {
    return this.call({ op: 'setFaults', faults });
  }

  /** Changes the service's limits from now on (fields left out stay as they are). */
  setLimits(limits: LimitsPatch): Promise<void> {
    return this.call({ op: 'setLimits', limits });
  }

  /** Running counts (answers, 429s, creations in flight), cheap enough to read every second. */
  counters(): Promise<SimCounters> {
    return this.call({ op: 'counters' });
  }

  /** Time of the first API request at or after `since` (ms since the epoch), or null. Needs `count`. */
  firstRequestAfter(since: number): Promise<number | null> {
    return this.call({ op: 'firstRequestAfter', since });
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    try {
      await this.call({ op: 'close' }).catch(() => undefined);
      this.child.kill('SIGTERM');
      await exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
