import { readFileSync } from 'node:fs';

/**
 * What Linux says about a process in /proc: CPU seconds (user + system, from /proc/<pid>/stat) and memory
 * (VmHWM, the peak resident set, and VmRSS from /proc/<pid>/status). Read from outside, so the figures of the
 * worker, the dev server, the simulator host and the CLI are each their own, not the bench's.
 */

/** Clock ticks per second of /proc/<pid>/stat (`getconf CLK_TCK`): 100 on every Linux the bench runs on. */
const CLOCK_TICKS = 100;

export interface ProcSample {
  cpuSeconds: number;
  /** Peak resident set so far (VmHWM), MB. */
  peakRssMb: number;
  rssMb: number;
}

/** One reading, or undefined once the process has gone. */
export function readProc(pid: number): ProcSample | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    // A process that has exited but is not reaped yet (a zombie) has no memory lines: no reading then.
    if (!/^VmHWM:/m.test(status)) return undefined;
    return { cpuSeconds: ticks / CLOCK_TICKS, peakRssMb: kbField(status, 'VmHWM'), rssMb: kbField(status, 'VmRSS') };
  } catch {
    return undefined;
  }
}

function kbField(status: string, name: string): number {
  const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) / 1024 : 0;
}

/**
 * Samples processes every `everyMs` and keeps, per name, the last reading seen while the process lived: VmHWM
 * is a high-water mark and CPU time only grows, so the last reading before exit is the peak and the total (to
 * within one interval). `mark()` takes a baseline, so CPU can be counted from a moment on (after start-up).
 */
export class ProcWatch {
  private readonly pids = new Map<string, number>();
  private readonly last = new Map<string, ProcSample>();
  private readonly base = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(everyMs = 200) {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  /** Watches `pid` under `name` (a restarted process under the same name adds to its CPU, see {@link cpu}). */
  watch(name: string, pid: number | undefined): void {
    if (pid === undefined) return;
    const previous = this.pids.get(name);
    if (previous !== undefined && previous !== pid) {
      // A new process under an old name: fold the old one's CPU into the baseline so that totals add up.
      const old = this.last.get(name);
      if (old) this.base.set(name, (this.base.get(name) ?? 0) - old.cpuSeconds);
      this.last.delete(name);
    }
    this.pids.set(name, pid);
    this.sampleOne(name, pid);
  }

  /** Starts counting CPU from now for every watched process. */
  mark(): void {
    this.sample();
    for (const [name, s] of this.last) this.base.set(name, s.cpuSeconds);
  }

  /** CPU seconds of `name` since {@link mark} (or since it started). */
  cpu(name: string): number {
    const pid = this.pids.get(name);
    if (pid !== undefined) this.sampleOne(name, pid);
    return (this.last.get(name)?.cpuSeconds ?? 0) - (this.base.get(name) ?? 0);
  }

  /** Peak RSS (MB) of the current process under `name`. */
  peakRssMb(name: string): number {
    const pid = this.pids.get(name);
    if (pid !== undefined) this.sampleOne(name, pid);
    return this.last.get(name)?.peakRssMb ?? 0;
  }

  /** The pid watched under `name` (the latest, after a restart). */
  pid(name: string): number | undefined {
    return this.pids.get(name);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sample(): void {
    for (const [name, pid] of this.pids) this.sampleOne(name, pid);
  }

  private sampleOne(name: string, pid: number): void {
    const s = readProc(pid);
    if (s) this.last.set(name, s);
  }
}
