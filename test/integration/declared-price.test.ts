import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { spendText } from '../../src/cli/progress-line';
import type { LedgerStore } from '../../src/ledger';
import { CanaryPhase, type BatchProgress } from '../../src/model';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { cancelSignal, progressQuery } from '../../src/workflows';
import { tempLedger } from '../helpers/ledger';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * A declared price is checked, not trusted (issue 43, point 3). A tester gave `--price flux-dev=0.01 --spend-cap
 * 0.10` to a $0.04 service: once the worker's settings were proven (no canary), 8 rows went out at once and $0.32 was
 * paid. Here the catalog shows no price (the worker reads it under a name the service does not use), so the cap
 * counts on the price given: one row goes alone until its record shows the cost, and the charges at the simulator
 * stay within the cap. Where the service shows no price at all, spend says "at your price, unconfirmed", per row too.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
const sims: Simulator[] = [];
const stores: LedgerStore[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-declared-price-'));
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await Promise.all(sims.map((s) => s.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function simulator(pricing: SimulatorConfigInput['pricing']): Promise<Simulator> {
  const sim = await startSimulator({
    pricing,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 150, maxMs: 250 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
  sims.push(sim);
  return sim;
}

async function fileOf(model: string, rows: number): Promise<string> {
  const file = path.join(dir, `${model}-${randomUUID().slice(0, 6)}.csv`);
  const lines = Array.from({ length: rows }, (_, i) => `r${i},a ${model} picture ${randomUUID()},${model}`);
  await writeFile(file, `id,prompt,model\n${lines.join('\n')}\n`);
  return file;
}

/** The batch's progress once `done` says so (bounded). */
async function progressWhen(
  handle: { query: (q: typeof progressQuery) => Promise<BatchProgress> },
  done: (p: BatchProgress) => boolean,
): Promise<BatchProgress> {
  let last: BatchProgress | undefined;
  for (let i = 0; i < 300; i++) {
    last = await handle.query(progressQuery);
    if (done(last)) return last;
    await sleep(100);
  }
  throw new Error(`the batch never got there: ${JSON.stringify(last)}`);
}

describe('a price given with a spend cap', { timeout: 120_000 }, () => {
  it('too low, after a proven canary: one row alone until its record shows the cost; within the cap', async () => {
    const sim = await simulator({ fields: 'default' });
    const ledger = await tempLedger();
    stores.push(ledger);
    const { worker, taskQueue } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'declared',
      ledger,
      // The catalog's prices are not read: only the price given counts, until a creation shows its cost.
      config: { priceFields: ['no_such_price'] },
    });
    const { client } = env();
    await worker.runUntil(async () => {
      // A first batch proves the worker's settings (its canary passes), at the right price.
      const proving = await startOrAttachBatch({
        client,
        taskQueue,
        ledger,
        batchId: `prove-${randomUUID().slice(0, 6)}`,
        file: await fileOf('sdxl', 2),
        outDir: path.join(dir, 'prove'),
        prices: { sdxl: 0.02 },
      });
      expect((await proving.handle.result()).counts.succeeded).toBe(2);
      const before = sim.charges.byCreation().length;

      const { handle } = await startOrAttachBatch({
        client,
        taskQueue,
        ledger,
        batchId: `low-${randomUUID().slice(0, 6)}`,
        file: await fileOf('flux-dev', 8),
        outDir: path.join(dir, 'low'),
        concurrency: 8,
        prices: { 'flux-dev': 0.01 },
        spendCapUsd: 0.1,
      });
      const first = await progressWhen(handle, (p) => p.started >= 1);
      expect(first.canary).toBe(CanaryPhase.Proven);
      // The first row's record shows $0.04: the stop-loss pauses the batch, and nothing else was sent.
      const paused = await progressWhen(handle, (p) => p.status === 'paused');
      expect(paused.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'price_differs', rowId: 'r0' } });
      await handle.signal(cancelSignal);
      await handle.result();
      const paid = sim.charges.byCreation().slice(before);
      const paidUsd = paid.reduce((s, c) => s + c.netUsd, 0);
      expect(paidUsd).toBeLessThanOrEqual(0.1 + 1e-9);
      expect(paid.length).toBe(1);
      expect(paused.pricesSeen).toEqual([{ model: 'flux-dev', givenUsd: 0.01, source: 'user', chargedUsd: 0.04 }]);
    });
  });

  it('a service that shows no price: spend at your price, unconfirmed, in the progress and per row', async () => {
    const sim = await simulator({ fields: 'hidden' });
    const ledger = await tempLedger();
    stores.push(ledger);
    const { worker, taskQueue } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'unconfirmed',
      ledger,
    });
    const { client } = env();
    await worker.runUntil(async () => {
      const batchId = `none-${randomUUID().slice(0, 6)}`;
      const { handle } = await startOrAttachBatch({
        client,
        taskQueue,
        ledger,
        batchId,
        file: await fileOf('sdxl', 3),
        outDir: path.join(dir, 'none'),
        concurrency: 3,
        prices: { sdxl: 0.02 },
        spendCapUsd: 1,
      });
      const seen: number[] = [];
      let ended = false;
      const result = handle.result().finally(() => (ended = true));
      while (!ended) {
        seen.push((await handle.query(progressQuery)).inFlight);
        await sleep(100);
      }
      const done = await result;
      // No record ever confirms the price: one row at a time, to the end.
      expect(Math.max(...seen)).toBe(1);
      expect(done).toMatchObject({ spentUsd: 0.06, unconfirmedUsd: 0.06 });
      expect(spendText(done)).toMatch(/^spent \$0\.06 at your price, unconfirmed, /);
      const written = await results({ client, batchId, ledger });
      const rows = (await readFile(written.resultsJsonl, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.map((r) => r.price_unconfirmed)).toEqual([true, true, true]);
      expect(await readFile(written.resultsCsv, 'utf8')).toMatch(/,unconfirmed\r?\n/);
    });
  });
});
