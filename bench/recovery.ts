/**
 * 5. Crash recovery: a 1,000-row batch against a service with 1-3 s generations; when a third of the rows have
 * ended, the worker is killed (SIGKILL) and started again at once. How long from the restart until the service
 * sees the first new request, and until the batch ends, with every row paid once?
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { batchWorkflowId, type BatchProgress } from '../src/model';
import { progressQuery } from '../src/workflows';
import { writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { simulatorSettings } from './lib/settings';
import { Stack } from './lib/stack';
import { num, type Table } from './lib/table';

/** Rows in flight: the crash catches this many rows mid-way. */
export const RECOVERY_CONCURRENCY = 100;

export const recovery: Benchmark = {
  name: 'recovery',
  async run(ctx: BenchContext) {
    const rows = ctx.quick ? 200 : 1000;
    const stack = await Stack.start({
      name: 'recovery',
      sim: simulatorSettings({ generationMs: { min: 1000, max: 3000 }, minPollIntervalMs: 1000 }),
      workerEnv: { IMAGEGEN_MIN_POLL_INTERVAL_MS: '1000' },
    });
    let m: {
      atKill: BatchProgress;
      killToRestart: number;
      restartToReady: number;
      restartToRequest: number;
      batchSeconds: number;
      afterRestart: number;
      succeeded: number;
      doubleCharges: number;
    };
    try {
      const file = path.join(stack.dir, 'recovery.csv');
      await writeBatchFile(file, rows);
      const cli = stack.startRun(file, 'recovery', RECOVERY_CONCURRENCY);
      const handle = stack.client!.workflow.getHandle(batchWorkflowId('recovery'));
      let atKill: BatchProgress | undefined;
      for (const deadline = Date.now() + 30 * 60_000; Date.now() < deadline; await sleep(200)) {
        const p = await handle.query(progressQuery).catch(() => undefined);
        if (p && p.counts.succeeded >= rows / 3) {
          atKill = p;
          break;
        }
        if (!cli.running) throw new Error(`the run ended before the crash:\n${cli.output()}`);
      }
      if (!atKill) throw new Error('a third of the rows did not end within 30 minutes');
      ctx.log(`recovery: SIGKILL the worker with ${atKill.counts.succeeded} rows done, ${atKill.inFlight} in flight`);
      const killedAt = Date.now();
      await stack.worker?.kill();
      const restartAt = Date.now();
      await stack.startWorker();
      const readyAt = Date.now();
      let firstRequest: number | null = null;
      for (const deadline = Date.now() + 10 * 60_000; Date.now() < deadline && firstRequest === null;) {
        firstRequest = await stack.sim.firstRequestAfter(restartAt);
        if (firstRequest === null) await sleep(50);
      }
      if (firstRequest === null) throw new Error('no request reached the service within 10 minutes of the restart');
      const run = await stack.finishRun(cli, 60 * 60_000);
      const report = await stack.sim.report();
      m = {
        atKill,
        killToRestart: (restartAt - killedAt) / 1000,
        restartToReady: (readyAt - restartAt) / 1000,
        restartToRequest: (firstRequest - restartAt) / 1000,
        batchSeconds: run.seconds,
        afterRestart: (run.endedAt - restartAt) / 1000,
        succeeded: run.progress.counts.succeeded,
        doubleCharges: report.doubleCharges + report.chargedTwiceByKey,
      };
      ctx.log(`recovery: first request ${m.restartToRequest.toFixed(2)} s after the restart`);
    } finally {
      await stack.close();
    }
    const table: Table = {
      title: `5. Crash recovery (${num(rows)} rows, worker SIGKILLed a third of the way)`,
      headers: [
        'rows done / in flight at the kill',
        'restart -> worker polling s',
        'restart -> first new request s',
        'batch wall s',
        'restart -> batch end s',
        'rows ok',
        'double charges',
      ],
      rows: [
        [
          `${num(m.atKill.counts.succeeded)} / ${num(m.atKill.inFlight)}`,
          num(m.restartToReady, 2),
          num(m.restartToRequest, 2),
          num(m.batchSeconds, 1),
          num(m.afterRestart, 1),
          `${num(m.succeeded)} / ${num(rows)}`,
          num(m.doubleCharges),
        ],
      ],
      notes: [
        `The restart is the spawn of \`imagebatch worker\` right after the old one died (${num(m.killToRestart * 1000)} ms ` +
          `after the SIGKILL); "polling" is its "worker polling" line, after it loaded its workflow bundle (cached in ` +
          `\`dist/\` by the first start of this build); the first new request is the first API request the simulator ` +
          `received after the restart.`,
        `Settings: generation 1-3 s, poll interval 1 s, no rate limit, \`--concurrency ${RECOVERY_CONCURRENCY}\`. Activities ` +
          `the dead worker was running are retried once their heartbeat or start-to-close timeout passes; rows whose ` +
          `next workflow task waited on the dead worker's sticky queue move to the shared queue after 10 s.`,
      ],
    };
    return { table };
  },
};
