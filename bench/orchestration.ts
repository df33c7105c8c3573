/**
 * 3. Orchestration overhead: a batch through the whole system (CLI, dev server on SQLite, worker, simulator) with
 * a zero-latency simulator and no rate limit, so that only the orchestration costs time. Prompts per second end
 * to end, CPU seconds per prompt of each process, history events per prompt; then a second, smaller batch with
 * the worker under `node --cpu-prof` (and the dev server under `perf`, when perf and go are installed) for the
 * profile that shows where the time goes. Goal: at least 40 prompts/s on 2 cores.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { loadToolchainOverrides } from '../src/config/toolchain-config';
import { requireTemporalCli } from '../src/temporal/toolchain';
import { rowIds, writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { summariseProfile, type ProfileSummary } from './lib/cpu-profile';
import { startGoProfile, type GoProfile } from './lib/go-profile';
import { countHistories } from './lib/histories';
import { simulatorSettings } from './lib/settings';
import { Proc, Stack } from './lib/stack';
import { num, verdict, type Table } from './lib/table';

export const ORCHESTRATION_GOAL = 40;

/**
 * Rows in flight: enough to keep both cores busy (200 gave the same prompts/s on this machine, with a worker about
 * 60 MB larger).
 */
export const ORCHESTRATION_CONCURRENCY = 100;

/** Worker settings for a zero-latency service: no poll interval to wait out (the rest are the defaults). */
export const ZERO_LATENCY_WORKER_ENV = { IMAGEGEN_MIN_POLL_INTERVAL_MS: '1' };

interface Measured {
  label: string;
  rows: number;
  seconds: number;
  cpu: Record<string, number>;
  workerPeakRssMb: number;
  eventsPerRow: number;
  batchBusyShare: number;
  batchTaskMeanMs: number;
}

export interface OrchestrationResult {
  promptsPerSecond: number;
}

export const orchestration: Benchmark = {
  name: 'orchestration',
  async run(ctx: BenchContext) {
    const rows = ctx.quick ? 200 : 2000;
    const profiledRows = ctx.quick ? 100 : 600;
    const stack = await Stack.start({
      name: 'orchestration',
      count: false,
      sim: simulatorSettings({ generationMs: { min: 0, max: 0 } }),
      workerEnv: ZERO_LATENCY_WORKER_ENV,
    });
    const measured: Measured[] = [];
    let workerProfiles: Array<{ name: string; summary: ProfileSummary }> = [];
    let serverProfile: GoProfile | undefined;
    let rowEventTypes: string[] = [];
    try {
      // A short warm-up batch: the worker's JIT and the server's caches, as in any long-running deployment.
      await runOne(stack, ctx, 'warm-up', ctx.quick ? 20 : 100);
      const main = await runOne(stack, ctx, 'measured', rows);
      measured.push(main.measured);
      rowEventTypes = main.rowEventTypes;

      // The profiled run: a fresh worker under --cpu-prof, the server under perf.
      const profileDir = path.join(stack.dir, 'profiles');
      await stack.worker?.stop();
      await stack.startWorker(['--cpu-prof', `--cpu-prof-dir=${profileDir}`]);
      const perf = startGoProfile(
        stack.server.pid,
        requireTemporalCli(loadToolchainOverrides().temporalCli),
        path.join(stack.dir, 'perf.data'),
      );
      const profiled = await runOne(stack, ctx, 'profiled (worker under --cpu-prof, server under perf)', profiledRows);
      serverProfile = await perf?.stop();
      await stack.worker?.stop(); // the profile is written when the worker exits
      measured.push(profiled.measured);
      workerProfiles = readdirSync(profileDir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .sort()
        .map((f, i) => ({
          name: i === 0 ? 'worker main thread' : 'worker workflow thread',
          summary: summariseProfile(path.join(profileDir, f), 6),
        }));
    } finally {
      await stack.close();
    }

    const main = measured[0]!;
    const rate = main.rows / main.seconds;
    const batchBusy = main.batchBusyShare;
    const batchTaskMs = main.batchTaskMeanMs;
    const cpuTotal = (m: Measured) => Object.values(m.cpu).reduce((a, b) => a + b, 0);
    const table: Table = {
      title: '3. Orchestration overhead (zero-latency simulator, no rate limit)',
      headers: [
        'run',
        'prompts',
        'wall s',
        'prompts/s',
        'CPU ms/prompt: worker',
        'dev server',
        'simulator',
        'CLI',
        'all',
        'history events/prompt',
        'worker peak RSS MB',
      ],
      rows: measured.map((m) => [
        m.label,
        m.rows,
        num(m.seconds, 1),
        num(m.rows / m.seconds, 1),
        num((m.cpu[Proc.Worker]! / m.rows) * 1000, 1),
        num((m.cpu[Proc.Server]! / m.rows) * 1000, 1),
        num((m.cpu[Proc.Sim]! / m.rows) * 1000, 1),
        num((m.cpu[Proc.Cli]! / m.rows) * 1000, 1),
        num((cpuTotal(m) / m.rows) * 1000, 1),
        num(m.eventsPerRow, 1),
        num(m.workerPeakRssMb),
      ]),
      notes: [
        `Goal: at least ${ORCHESTRATION_GOAL} prompts/s end to end on 2 cores: ${verdict(rate >= ORCHESTRATION_GOAL)} ` +
          `(${num(rate, 1)} prompts/s; CPU of all processes ${num((cpuTotal(main) / main.rows) * 1000, 1)} ms per ` +
          `prompt, so 2 fully busy cores allow at most ${num(2 / (cpuTotal(main) / main.rows), 1)} prompts/s).`,
        `Settings: \`imagebatch run --concurrency ${ORCHESTRATION_CONCURRENCY}\` (page size 100), the worker's ` +
          `defaults, the dev server on a SQLite file with \`journal_mode=wal\` and \`synchronous=off\`. A warm-up ` +
          `batch ran first. The batch workflow had a workflow task scheduled or running ${num(batchBusy * 100)}% of ` +
          `its life (mean ${num(batchTaskMs)} ms per task): ${batchBusy > 0.9 ? 'it paces the rows' : 'it is not what paces the rows'}.`,
        `A row's own history (${rowEventTypes.length} events): ${compress(rowEventTypes)}.`,
        ...workerProfiles.map(
          (p) =>
            `Profile, ${p.name} (${num(p.summary.busyMs / 1000, 1)} s busy): ` +
            p.summary.areas.map((a) => `${a.name} ${num(a.share * 100)}%`).join(', ') +
            `; top functions: ${p.summary.functions
              .slice(0, 4)
              .map((f) => `\`${f.name}\` ${num(f.share * 100)}%`)
              .join(', ')}.`,
        ),
        serverProfile
          ? `Profile, dev server (perf, ${serverProfile.samples} samples; a sample counts for every subsystem on its ` +
            `stack): ${serverProfile.subsystems.map((s) => `${s.name} ${num(s.share * 100)}%`).join(', ')}.`
          : 'Profile, dev server: not taken (needs `perf` and `go` on the PATH).',
      ],
    };
    return { table, result: { promptsPerSecond: rate } satisfies OrchestrationResult };
  },
};

/** Event types in order, runs of the same type folded: `A, B x3, C`. */
function compress(types: string[]): string {
  const out: string[] = [];
  for (let i = 0; i < types.length;) {
    let j = i;
    while (types[j] === types[i]) j++;
    out.push(j - i > 1 ? `${types[i]} x${j - i}` : (types[i] ?? ''));
    i = j;
  }
  return out.join(', ');
}

async function runOne(
  stack: Stack,
  ctx: BenchContext,
  label: string,
  rows: number,
): Promise<{ measured: Measured; rowEventTypes: string[] }> {
  const batchId = `orch-${label.split(' ')[0]}`;
  const file = path.join(stack.dir, `${batchId}.csv`);
  await writeBatchFile(file, rows);
  ctx.log(`orchestration: ${label} batch of ${rows} rows`);
  stack.watch.mark();
  const run = await stack.runBatch(file, batchId, ORCHESTRATION_CONCURRENCY, 30 * 60_000);
  if (run.progress.counts.succeeded !== rows) {
    throw new Error(`orchestration: ${JSON.stringify(run.progress.counts)} of ${rows} rows`);
  }
  const cpu = {
    [Proc.Worker]: stack.watch.cpu(Proc.Worker),
    [Proc.Server]: stack.watch.cpu(Proc.Server),
    [Proc.Sim]: stack.watch.cpu(Proc.Sim),
    [Proc.Cli]: run.cliCpuSeconds,
  };
  const histories = await countHistories(stack.client!, batchId, rowIds(rows), 20);
  ctx.log(`orchestration: ${label}: ${rows} rows in ${run.seconds.toFixed(1)} s`);
  return {
    measured: {
      label,
      rows,
      seconds: run.seconds,
      cpu,
      workerPeakRssMb: stack.watch.peakRssMb(Proc.Worker),
      eventsPerRow: histories.eventsPerRow,
      batchBusyShare: histories.batchTaskBusyShare,
      batchTaskMeanMs: histories.batchTaskMeanMs,
    },
    rowEventTypes: histories.rowEventTypes,
  };
}
