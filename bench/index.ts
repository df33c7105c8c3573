/**
 * `npm run bench`: the six benchmarks of BENCHMARKS.md, each against real processes (the Temporal dev server,
 * the simulator, the product's worker and CLI), printed as markdown tables ready to paste.
 *
 *   npm run bench                                   # everything (about 1.5 hours on 2 cores: the 100,000-row batch)
 *   npm run bench -- --quick                        # small sizes: proves the bench works, not the figures
 *   npm run bench -- --only orchestration,scale     # some of: utilisation, naive, orchestration, scale, recovery,
 *                                                   # limits, footprint
 *   npm run bench -- --out bench-results.md         # also write the markdown to a file (plots beside it)
 *
 * Progress goes to stderr, tables to stdout; plots (SVG) beside the --out file, else in bench/out/.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDistIsFresh } from '../test/helpers/dist';
import type { Benchmark, BenchContext } from './lib/context';
import { toMarkdown, type Table } from './lib/table';
import { limitsChange } from './limits-change';
import { footprint } from './footprint';
import { naive } from './naive';
import { orchestration } from './orchestration';
import { recovery } from './recovery';
import { scale } from './scale';
import { utilisation } from './utilisation';

const BENCHMARKS: readonly Benchmark[] = [utilisation, naive, orchestration, scale, recovery, limitsChange, footprint];

interface Flags {
  only: Set<string> | undefined;
  quick: boolean;
  out: string | undefined;
}

/** Reads `--only a,b`, `--quick`, `--out file`; an unknown flag or name is an error that lists the valid ones. */
export function parseFlags(argv: readonly string[]): Flags {
  const flags: Flags = { only: undefined, quick: false, out: undefined };
  const names = BENCHMARKS.map((b) => b.name);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--quick') flags.quick = true;
    else if (arg === '--out') flags.out = value();
    else if (arg === '--only') {
      const wanted = value()
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const unknown = wanted.filter((n) => !names.includes(n));
      if (unknown.length) throw new Error(`unknown benchmark(s) ${unknown.join(', ')}; known: ${names.join(', ')}`);
      flags.only = new Set(wanted);
    } else throw new Error(`unknown argument ${arg}; use --only <${names.join(',')}>, --quick, --out <file>`);
  }
  return flags;
}

/** The machine the figures come from, for the heading of the results. */
function machine(): string[] {
  const sh = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
    } catch {
      return '(unavailable)';
    }
  };
  const [load1, load5] = os.loadavg();
  return [
    `- Date: ${sh('date', [])}`,
    `- Machine: \`nproc\` ${sh('nproc', [])}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, ` +
      `\`free -g\` total ${/^Mem:\s+(\d+)/m.exec(sh('free', ['-g']))?.[1] ?? '?'} GiB, Node ${process.version}, ` +
      `${os.type()} ${os.release()}`,
    `- Load average when the run started: ${load1?.toFixed(2)} (1 min), ${load5?.toFixed(2)} (5 min)` +
      ((load1 ?? 0) >= QUIET_LOAD
        ? ' — **other processes were using the CPU**: figures are lower than on a quiet machine'
        : ''),
  ];
}

/** The 1-minute load average under which a run counts as started on a quiet machine. */
const QUIET_LOAD = 1;
/** How long a full run waits for the machine to get quiet (the set-up's own build raises the load). */
const QUIET_WAIT_MS = 5 * 60_000;

/** Waits (a bounded time) for the 1-minute load average to fall under {@link QUIET_LOAD}; the header says if not. */
async function waitForQuiet(log: (line: string) => void): Promise<void> {
  const deadline = Date.now() + QUIET_WAIT_MS;
  for (let load = os.loadavg()[0] ?? 0; load >= QUIET_LOAD && Date.now() < deadline; load = os.loadavg()[0] ?? 0) {
    log(`waiting for a quiet machine: load average ${load.toFixed(2)} (1 min), under ${QUIET_LOAD} wanted`);
    await new Promise((r) => setTimeout(r, 15_000));
  }
}

/** A file beside the tables: `<out's name>-<suffix>` beside `--out`, else `bench/out/bench-<suffix>`. */
function artifactPath(out: string | undefined, suffix: string): string {
  const dir = out ? path.dirname(path.resolve(out)) : path.join(__dirname, 'out');
  mkdirSync(dir, { recursive: true });
  const base = out ? path.basename(out, path.extname(out)) : 'bench';
  return path.join(dir, `${base}-${suffix}`);
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  await ensureDistIsFresh();
  if (!flags.quick) await waitForQuiet(log);
  const started = Date.now();
  const header = [
    `## Results${flags.quick ? ' (--quick: small sizes, not the figures of record)' : ''}`,
    '',
    ...machine(),
  ];
  process.stdout.write(`${header.join('\n')}\n\n`);
  const ctx: BenchContext = {
    quick: flags.quick,
    log,
    earlier: new Map(),
    artifact: (s) => artifactPath(flags.out, s),
  };
  const sections: string[] = [];
  let failed = false;
  for (const bench of BENCHMARKS) {
    if (flags.only && !flags.only.has(bench.name)) continue;
    const t0 = Date.now();
    log(`${bench.name}: starting`);
    let table: Table;
    let more: Table[] = [];
    try {
      const out = await bench.run(ctx);
      table = out.table;
      more = out.more ?? [];
      ctx.earlier.set(bench.name, out.result);
    } catch (err) {
      failed = true;
      const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
      log(`${bench.name}: FAILED\n${message}`);
      table = { title: `${bench.name}: failed`, headers: ['error'], rows: [[message.split('\n')[0] ?? '']], notes: [] };
    }
    table.notes.push(`This benchmark took ${((Date.now() - t0) / 60_000).toFixed(1)} min.`);
    for (const md of [table, ...more].map(toMarkdown)) {
      sections.push(md);
      process.stdout.write(`${md}\n`);
    }
  }
  const total = `Total wall time of the run: ${((Date.now() - started) / 60_000).toFixed(1)} min.`;
  process.stdout.write(`${total}\n`);
  if (flags.out) writeFileSync(flags.out, `${[header.join('\n'), ...sections, total].join('\n\n')}\n`);
  if (failed) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
