import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

/**
 * A CPU profile of the Temporal dev server (a Go binary without a symbol table) with `perf record`, symbolised
 * through the binary's own pclntab with `go tool addr2line`. Optional: without `perf` or `go` on the machine,
 * {@link startGoProfile} returns undefined and the bench says so.
 */

export interface GoProfileEntry {
  name: string;
  share: number;
}

export interface GoProfile {
  samples: number;
  /** Share of samples whose stack passes through each subsystem (a sample may count for several). */
  subsystems: GoProfileEntry[];
  /** Functions by self time. */
  functions: GoProfileEntry[];
}

/** Subsystems of the server by a substring of a function name on the stack. */
const SUBSYSTEMS: ReadonlyArray<[string, string]> = [
  ['persistence/sql', 'persistence on SQL (Temporal tables)'],
  ['modernc.org/sqlite', 'SQLite engine (modernc, C translated to Go)'],
  ['persistence/visibility', 'visibility store (list/search records)'],
  ['service/history', 'history service'],
  ['service/matching', 'matching service (task queues)'],
  ['google.golang.org/grpc', 'gRPC'],
  ['google.golang.org/protobuf', 'protobuf encoding'],
  ['runtime.gcBgMarkWorker', 'Go garbage collector (background marking)'],
  ['runtime.mallocgc', 'Go allocation'],
  ['[kernel]', 'kernel (system calls, I/O)'],
];

function has(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

/** A running `perf record` of one process. */
export interface GoProfiler {
  stop(): Promise<GoProfile | undefined>;
}

/** Starts sampling `pid` (`perf record -g`), or returns undefined when perf or go is missing. */
export function startGoProfile(pid: number | undefined, binary: string, dataFile: string): GoProfiler | undefined {
  if (pid === undefined || !has('perf', ['--version']) || !has('go', ['version'])) return undefined;
  const perf: ChildProcess = spawn('perf', ['record', '-F', '199', '-g', '-p', String(pid), '-o', dataFile], {
    stdio: 'ignore',
  });
  return {
    async stop() {
      if (perf.exitCode === null) {
        const exited = new Promise((resolve) => perf.once('exit', resolve));
        perf.kill('SIGINT');
        await exited;
      }
      try {
        return symbolise(dataFile, binary);
      } catch {
        return undefined;
      }
    },
  };
}

function symbolise(dataFile: string, binary: string): GoProfile | undefined {
  const script = spawnSync('perf', ['script', '-i', dataFile, '--show-mmap-events', '-F', 'ip,dso'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (script.status !== 0) return undefined;
  // perf prints addresses inside the binary relative to its mapping: add the mapping's start back.
  let base = 0;
  const samples: string[][] = [];
  let current: string[] = [];
  for (const raw of script.stdout.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('PERF_RECORD_MMAP')) {
      const m = /\[(0x[0-9a-f]+)\(0x[0-9a-f]+\) @ (0x[0-9a-f]+|0) .*\]: r-xp (\S+)$/.exec(line);
      if (m?.[3] === binary) base = Number.parseInt(m[1] ?? '0', 16) - Number.parseInt(m[2] ?? '0', 16);
      continue;
    }
    if (!line) {
      if (current.length) samples.push(current);
      current = [];
      continue;
    }
    const [ip, dso] = line.split(/\s+/);
    current.push(dso === `(${binary})` && ip ? (Number.parseInt(ip, 16) + base).toString(16) : '[kernel]');
  }
  if (current.length) samples.push(current);
  if (samples.length === 0) return undefined;
  const addresses = [...new Set(samples.flat().filter((a) => a !== '[kernel]'))];
  const lookup = spawnSync('go', ['tool', 'addr2line', binary], {
    input: addresses.map((a) => `0x${a}`).join('\n') + '\n',
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  const lines = lookup.stdout.split('\n');
  const names = new Map(addresses.map((a, i) => [a, lines[2 * i] ?? '?']));
  const self = new Map<string, number>();
  const subsystems = new Map<string, number>();
  for (const stack of samples) {
    const fns = stack.map((a) => (a === '[kernel]' ? '[kernel]' : (names.get(a) ?? '?')));
    const leaf = fns[0] ?? '?';
    self.set(leaf, (self.get(leaf) ?? 0) + 1);
    for (const [needle, label] of SUBSYSTEMS) {
      if (fns.some((f) => f.includes(needle))) subsystems.set(label, (subsystems.get(label) ?? 0) + 1);
    }
  }
  const rank = (m: Map<string, number>, top: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, n]) => ({ name, share: n / samples.length }));
  return { samples: samples.length, subsystems: rank(subsystems, SUBSYSTEMS.length), functions: rank(self, 10) };
}
