/**
 * A batch's rows in flight and the service's load, sampled every second while it runs: the simulator host's running
 * counts (answers, 429s, creations in flight) and the batch's own progress (rows in flight, its window and what bounds
 * it). Read by ./follow.ts; drawn by ./plot.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { batchWorkflowId, type BatchProgress } from '../../src/model';
import { progressQuery } from '../../src/workflows/definitions';
import { rowsDone } from './series';
import type { Stack } from './stack';

/** One sample. The batch's figures are undefined until its progress query first answers. */
export interface LimitsPoint {
  /** Seconds since sampling started (the simulator host's clock, which timed the counts). */
  t: number;
  /** Answers of the simulator so far (every status). */
  requests: number;
  /** 429s so far. */
  tooMany: number;
  /** Creations accepted and not yet ended at the simulator. */
  creationsInFlight: number;
  /** Rows that ended, as the batch's last answered query said. */
  rowsDone: number | undefined;
  /** Rows the batch has in flight (started, not ended). */
  rowsInFlight: number | undefined;
  /** The batch's window: rows in flight it allows now. */
  window: number | undefined;
  /** What bounds the window (`rate`, `concurrency` after a cut, `ceiling`), if anything. */
  boundBy: string | undefined;
}

/** How often {@link LimitsSampler} samples. */
export const LIMITS_SAMPLE_MS = 1000;

/**
 * Samples a batch every {@link LIMITS_SAMPLE_MS} from {@link start} to {@link stop}, calling `onSample` with each
 * sample (awaited before the next: it may change the service's limits). A query that does not answer keeps the
 * batch's previous figures.
 */
export class LimitsSampler {
  private readonly points: LimitsPoint[] = [];
  private running = false;
  private loop: Promise<void> | undefined;
  private t0 = 0;

  constructor(
    private readonly stack: Stack,
    private readonly batchId: string,
    private readonly onSample: (point: LimitsPoint, progress: BatchProgress | undefined) => Promise<void>,
  ) {}

  start(): void {
    this.running = true;
    this.t0 = Date.now();
    this.loop = this.run();
  }

  async stop(): Promise<LimitsPoint[]> {
    this.running = false;
    await this.loop;
    return this.points;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const started = Date.now();
      const { point, progress } = await this.sample();
      this.points.push(point);
      await this.onSample(point, progress);
      const wait = LIMITS_SAMPLE_MS - (Date.now() - started);
      for (let left = wait; left > 0 && this.running; left -= 100) await sleep(Math.min(100, left));
    }
  }

  private async sample(): Promise<{ point: LimitsPoint; progress: BatchProgress | undefined }> {
    const client = this.stack.client;
    const handle = client?.workflow.getHandle(batchWorkflowId(this.batchId));
    // A busy machine answers slowly: the query gets up to two intervals, the counts come at once.
    const deadline = Date.now() + 2 * LIMITS_SAMPLE_MS;
    const [counters, queried] = await Promise.all([
      this.stack.sim.counters(),
      client && handle
        ? client.withDeadline(deadline, () => handle.query(progressQuery)).catch(() => undefined)
        : Promise.resolve(undefined),
    ]);
    const previous = this.points.at(-1);
    const progress = queried;
    return {
      progress,
      point: {
        t: (counters.at - this.t0) / 1000,
        requests: counters.requests,
        tooMany: counters.tooMany,
        creationsInFlight: counters.creationsInFlight,
        rowsDone: progress ? rowsDone(progress) : previous?.rowsDone,
        rowsInFlight: progress ? progress.inFlight : previous?.rowsInFlight,
        window: progress ? progress.window?.size : previous?.window,
        boundBy: progress ? progress.window?.boundBy : previous?.boundBy,
      },
    };
  }
}
