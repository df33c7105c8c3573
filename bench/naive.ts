/**
 * 2. The same batch, the same service and the same faults, run by the script a user would write instead
 * (bench/naive/naive-batch.mjs: a p-limit pool over fetch with naive retries). Set beside imagebatch's figures of
 * benchmark 1 from the same run: wall time ratio, 429s, double charges.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEMO_API_KEY } from '../src/simulator';
import { writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { Child, REPO_ROOT } from './lib/processes';
import { ProcWatch } from './lib/proc';
import { simulatorSettings } from './lib/settings';
import { SimHost } from './lib/simulator';
import { num, verdict, type Cell, type Table } from './lib/table';
import type { SimHostReport } from './lib/sim-protocol';
import {
  RATE_LIMITED_SERVICE,
  lowerBoundSeconds,
  pct,
  tooManyOf,
  utilisationRows,
  type UtilisationResult,
} from './utilisation';

/** The pool size a user would pick for a 20 requests/s key: one row in flight per request per second. */
export const NAIVE_CONCURRENCY = 20;

interface NaiveSummary {
  rows: number;
  succeeded: number;
  failed: number;
  firstError?: string;
  requests: number;
  tooMany: number;
  seconds: number;
}

export const naive: Benchmark = {
  name: 'naive',
  async run(ctx: BenchContext) {
    const rows = utilisationRows(ctx.quick);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-bench-naive-'));
    const sim = await SimHost.start({
      sim: simulatorSettings({ ...RATE_LIMITED_SERVICE, faults: { ...RATE_LIMITED_SERVICE.faults } }),
    });
    const watch = new ProcWatch();
    let summary: NaiveSummary;
    let report: SimHostReport;
    let cpu: number;
    try {
      const file = path.join(dir, 'naive.csv');
      await writeBatchFile(file, rows);
      ctx.log(`naive: p-limit(${NAIVE_CONCURRENCY}) over fetch, ${rows} rows`);
      const script = new Child(
        spawn(
          process.execPath,
          [
            path.join(REPO_ROOT, 'bench', 'naive', 'naive-batch.mjs'),
            '--csv',
            file,
            '--base-url',
            sim.baseUrl,
            '--out',
            path.join(dir, 'out'),
            '--concurrency',
            String(NAIVE_CONCURRENCY),
            '--poll-ms',
            String(RATE_LIMITED_SERVICE.minPollIntervalMs),
          ],
          {
            cwd: REPO_ROOT,
            env: { ...process.env, IMAGEGEN_API_KEY: DEMO_API_KEY },
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        ),
      );
      watch.watch('naive', script.pid);
      const { code } = await script.exited;
      cpu = watch.cpu('naive');
      const line = script
        .output()
        .split('\n')
        .reverse()
        .find((l) => l.startsWith('{'));
      if (code !== 0 || !line) throw new Error(`the naive script exited with ${code}:\n${script.output()}`);
      summary = JSON.parse(line) as NaiveSummary;
      report = await sim.report();
      ctx.log(`naive: ${summary.succeeded}/${rows} rows in ${summary.seconds.toFixed(1)} s`);
    } finally {
      watch.stop();
      await sim.close();
      await rm(dir, { recursive: true, force: true });
    }

    const ours = ctx.earlier.get('utilisation') as UtilisationResult | undefined;
    const bound = lowerBoundSeconds(rows, report);
    const line = (who: string, seconds: number, ok: number, r: SimHostReport, ratio: string): Cell[] => [
      who,
      `${num(ok)} / ${num(rows)}`,
      num(seconds, 1),
      ratio,
      num(seconds / lowerBoundSeconds(rows, r), 3),
      num(r.requests),
      `${num(tooManyOf(r))} (${pct(tooManyOf(r), r.requests)})`,
      num(r.meanPollsPerCreation, 2),
      num(r.doubleCharges),
      num(r.netUsd, 2),
    ];
    const table: Table = {
      title: `2. imagebatch against a naive script (same ${num(rows)} rows, service and faults)`,
      headers: [
        'client',
        'rows ok',
        'wall s',
        'wall vs naive',
        'wall / bound',
        'requests',
        '429s',
        'polls/creation',
        'double charges',
        'net charged USD',
      ],
      rows: [
        ...(ours
          ? [line('imagebatch', ours.seconds, ours.succeeded, ours.report, num(ours.seconds / summary.seconds, 3))]
          : []),
        line(`naive: p-limit(${NAIVE_CONCURRENCY}) + fetch`, summary.seconds, summary.succeeded, report, '1.000'),
      ],
      notes: [
        ours
          ? `Goal: imagebatch's wall time at most 1.10x the naive script's: ${verdict(ours.seconds <= 1.1 * summary.seconds)} ` +
            `(${num(ours.seconds / summary.seconds, 3)}x). Double charges: imagebatch ${num(ours.report.doubleCharges)}, ` +
            `naive ${num(report.doubleCharges)} (rows paid more than once, from the simulator's charge book by prompt).`
          : 'imagebatch did not run in this run (`--only naive`): no ratio.',
        `The naive script: no idempotency key, so a retry after a 500 that came after the charge, or after a reset ` +
          `connection, is charged again; it waits Retry-After on 429s, polls every ${RATE_LIMITED_SERVICE.minPollIntervalMs} ms ` +
          `and downloads each image. Its own count: ${num(summary.requests)} requests, ${num(summary.tooMany)} 429s, ` +
          `${num(summary.failed)} rows failed${summary.firstError ? ` (first: ${summary.firstError.slice(0, 80)})` : ''}; ` +
          `CPU ${num(cpu, 1)} s. Bound as in benchmark 1, (rows x 2 + catalog requests) / rate: ${num(bound, 1)} s.`,
      ],
    };
    return { table };
  },
};
