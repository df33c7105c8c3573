import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { estimateLine, modelLines, validate } from '../../src/cli/commands/validate';
import { PriceBelowChargedError } from '../../src/cli/price-floor';
import { PriceUnknownError } from '../../src/cli/prices';
import type { LedgerStore } from '../../src/ledger';
import { FaultKind, startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { parseIdempotencyKey, type BatchProgress } from '../../src/model';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';
import { tempLedger } from '../helpers/ledger';

/**
 * Spend when the service shows prices under other names, shows none, or shows a creation's cost only when polled: a
 * batch against the simulator in each mode. Every figure is right (to the simulator's charge book, per row and in total)
 * or says it is unknown; never a 0 for a price nobody showed.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
const sims: Simulator[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-prices-'));
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

// sdxl costs 0.02 per image at the simulator. One row is declined by the safety filter (charged, refunded), one fails
// at generation once and then passes with a new key, one meets a 503 once (charged and refunded at submission).
const ROWS = [
  'id,prompt,model',
  'a,"a lighthouse on a cliff at dusk, oil painting",sdxl',
  'b,"a red fox in fresh snow, morning light",sdxl',
  'c,"a market street in the rain [flaky], watercolour",sdxl',
  'd,"a portrait of a knight [unsafe], studio light",sdxl',
  'e,"a paper boat on a pond [busy], macro photo",sdxl',
];

async function startSim(pricing: SimulatorConfigInput['pricing']): Promise<Simulator> {
  const sim = await startSimulator({
    pricing,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
    scripts: [
      { match: '[flaky]', faults: [FaultKind.FailGeneration] },
      { match: '[busy]', faults: [FaultKind.ProviderUnavailable] },
    ],
    faults: { providerRetryAfterSeconds: 1 },
  });
  sims.push(sim);
  return sim;
}

interface Run {
  progress: BatchProgress;
  jsonl: Record<string, unknown>[];
  csv: Record<string, string>[];
  batchId: string;
}

async function runBatch(
  sim: Simulator,
  { ledger: store, ...extra }: { prices?: Record<string, number>; spendCapUsd?: number; ledger?: LedgerStore } = {},
) {
  const folder = await mkdtemp(path.join(dir, 'run-'));
  const file = path.join(folder, 'prompts.csv');
  await writeFile(file, `${ROWS.join('\n')}\n`);
  const batchId = `p${randomUUID().slice(0, 8)}`;
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: folder,
    prefix: 'prices',
    ...(store ? { ledger: store } : {}),
  });
  return worker.runUntil(async (): Promise<Run> => {
    const { handle } = await startOrAttachBatch({
      ledger,
      client: env().client,
      taskQueue,
      batchId,
      file,
      outDir: path.join(folder, 'out'),
      concurrency: 3,
      ...extra,
    });
    const progress = await handle.result();
    const written = await results({ client: env().client, batchId, ledger });
    const jsonl = (await readFile(written.resultsJsonl, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const csv = parse<Record<string, string>>(await readFile(written.resultsCsv, 'utf8'), { columns: true });
    return { progress, jsonl, csv, batchId };
  });
}

/** The simulator's net, charged and refunded per row of the batch, and in total. */
function simulatorMoney(sim: Simulator, batchId: string) {
  const byRow = new Map<string, { charged: number; refunded: number; net: number }>();
  for (const c of sim.charges.byCreation()) {
    const key = parseIdempotencyKey(c.idempotencyKey ?? '');
    if (key?.batchId !== batchId) continue;
    const m = byRow.get(key.rowId) ?? { charged: 0, refunded: 0, net: 0 };
    byRow.set(key.rowId, {
      charged: m.charged + c.chargedUsd,
      refunded: m.refunded + c.refundedUsd,
      net: m.net + c.netUsd,
    });
  }
  const round = (n: number) => Math.round(n * 1e6) / 1e6;
  const total = round([...byRow.values()].reduce((s, m) => s + m.net, 0));
  return { byRow, total, round };
}

/**
 * Every row's figures equal the simulator's, and the batch's spend is their sum. `priceKnown`: what results.csv says
 * of each row's price (`unconfirmed` where it is the user's, which the service never showed).
 */
function expectFiguresRight(run: Run, sim: Simulator, priceKnown = 'true'): void {
  const { byRow, total, round } = simulatorMoney(sim, run.batchId);
  for (const line of run.jsonl) {
    const m = byRow.get(line.row_id as string)!;
    expect([line.row_id, line.charged_usd, line.refunded_usd, line.net_usd]).toEqual([
      line.row_id,
      round(m.charged),
      round(m.refunded),
      round(m.net),
    ]);
  }
  expect(run.progress.spentUsd).toBe(total);
  expect(run.progress.unknownSpendRows).toBe(0);
  expect(run.csv.map((r) => r.price_known)).toEqual(run.csv.map(() => priceKnown));
}

/** `validate --catalog` of the rows and a flux-dev row, through a worker against `sim`, with `prices` given. */
async function validateOn(sim: Simulator, prices: Record<string, number>) {
  const folder = await mkdtemp(path.join(dir, 'validate-'));
  const file = path.join(folder, 'prompts.csv');
  await writeFile(file, `${[...ROWS, 'f,"a tiger in tall grass, ink drawing",flux-dev'].join('\n')}\n`);
  const { worker, taskQueue } = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: folder,
    prefix: 'validate',
  });
  return worker.runUntil(() => validate({ file, catalog: { client: env().client, taskQueue }, prices }));
}

describe('prices the service shows, or not (dev server, simulator)', () => {
  it('prices under other names (a nested amount object, pricing.usd_per_image) are read: figures right', async () => {
    const sim = await startSim({ fields: 'renamed' });
    const run = await runBatch(sim);
    expect(run.progress.counts).toMatchObject({ succeeded: 4, failed: 1 });
    expect(run.progress.spentUsd).toBe(0.08);
    expectFiguresRight(run, sim);
    // The safety filter's row: charged and refunded in full.
    expect(run.jsonl.find((l) => l.row_id === 'd')).toMatchObject({
      charged_usd: 0.02,
      refunded_usd: 0.02,
      net_usd: 0,
    });
  }, 120_000);

  it('a cost shown only when polled: a failed creation is refunded what it was charged, and nothing goes negative', async () => {
    const sim = await startSim({ costOn: 'poll-only' });
    const run = await runBatch(sim);
    expectFiguresRight(run, sim);
    const flaky = run.jsonl.find((l) => l.row_id === 'c') as { keys: Record<string, unknown>[] };
    expect(flaky.keys.map((k) => [k.outcome, k.charged_usd, k.refunded_usd])).toEqual([
      ['failed', 0.02, 0.02],
      ['succeeded', 0.02, null],
    ]);
    expect(run.progress.refundedUsd).toBe(0.06);
  }, 120_000);

  it('no price anywhere: every figure that holds money says unknown (null, empty, price_known=false), never 0', async () => {
    const sim = await startSim({ fields: 'hidden' });
    const run = await runBatch(sim);
    expect(run.progress.counts).toMatchObject({ succeeded: 4, failed: 1 });
    // The four rows that hold money are of unknown spend; the refunded one is known to hold nothing.
    expect(run.progress).toMatchObject({ spentUsd: 0, unknownSpendRows: 4 });
    for (const id of ['a', 'b', 'c', 'e']) {
      expect(
        run.jsonl.find((l) => l.row_id === id),
        id,
      ).toMatchObject({ charged_usd: null, net_usd: null });
      expect(
        run.csv.find((r) => r.row_id === id),
        id,
      ).toMatchObject({ charged_usd: '', net_usd: '', price_known: 'false' });
    }
    expect(run.jsonl.find((l) => l.row_id === 'd')).toMatchObject({
      charged_usd: null,
      refunded_usd: null,
      net_usd: 0,
    });
    expect(run.csv.find((r) => r.row_id === 'd')).toMatchObject({ net_usd: '0.0000', price_known: 'false' });
  }, 120_000);

  it('no price anywhere, a price given with --price: figures right, each key says its price came from the user', async () => {
    const sim = await startSim({ fields: 'hidden' });
    const run = await runBatch(sim, { prices: { sdxl: 0.02 } });
    expectFiguresRight(run, sim, 'unconfirmed');
    expect(run.progress.unconfirmedUsd).toBe(run.progress.spentUsd);
    const keys = run.jsonl.flatMap((l) => l.keys as Record<string, unknown>[]);
    expect(new Set(keys.map((k) => k.price_source))).toEqual(new Set(['user']));
  }, 120_000);

  it('validate --catalog: each model with its price and where it comes from, or that it is unknown', async () => {
    const sim = await startSim({ fields: 'renamed' });
    const shown = await validateOn(sim, { 'flux-dev': 0.5 });
    // The catalog's price comes first, even where the user gave one.
    expect(modelLines(shown)).toEqual([
      'flux-dev: 1 rows, 1 images, $0.04 per image (catalog)',
      'sdxl: 5 rows, 5 images, $0.02 per image (catalog)',
    ]);
    expect(estimateLine(shown)).toBe('estimated cost: $0.14');
    expect(shown.ok).toBe(true);
  }, 120_000);

  it('validate --catalog on a service that shows no price: unknown, or the price the user gave', async () => {
    const sim = await startSim({ fields: 'hidden' });
    const res = await validateOn(sim, { sdxl: 0.02 });
    expect(modelLines(res)).toEqual([
      'flux-dev: 1 rows, 1 images, price unknown (the catalog shows none; give one with --price)',
      'sdxl: 5 rows, 5 images, $0.02 per image (your --price)',
    ]);
    expect(estimateLine(res)).toBe('estimated cost: at least $0.10, plus the rows of flux-dev (price unknown)');
    expect(res.ok).toBe(true);
  }, 120_000);

  it('a spend cap with no price known for a model is refused before anything starts, naming the model', async () => {
    const sim = await startSim({ fields: 'hidden' });
    const err = await runBatch(sim, { spendCapUsd: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PriceUnknownError);
    expect((err as PriceUnknownError).models).toEqual(['sdxl']);
    expect((err as Error).message).toMatch(/--price sdxl=<usd per image>/);
    expect(sim.charges.byCreation()).toEqual([]);
  }, 120_000);

  it('a price given below what the service charged for its model is refused before anything starts, naming the charge', async () => {
    const sim = await startSim({ fields: 'default' });
    const ledger = await tempLedger();
    try {
      // sdxl is charged 0.02 per image, and the store sees it.
      const first = await runBatch(sim, { ledger });
      const charged = sim.charges.byCreation().length;
      expect(charged).toBeGreaterThan(0);
      const err = await runBatch(sim, { ledger, prices: { sdxl: 0.01 }, spendCapUsd: 0.1 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PriceBelowChargedError);
      expect((err as Error).message).toMatch(
        new RegExp(
          `sdxl at \\$0\\.01 per image, and the service charged \\$0\\.02 on \\d{4}-\\d\\d-\\d\\d ` +
            `\\(batch ${first.batchId}, row [a-e]\\)`,
        ),
      );
      expect((err as Error).message).toMatch(/give --price sdxl=0\.02 or more/);
      expect(sim.charges.byCreation().length).toBe(charged);
      // The advice followed starts the batch, and the rows paid before are served from the store.
      const again = await runBatch(sim, { ledger, prices: { sdxl: 0.02 }, spendCapUsd: 1 });
      expect(again.progress.done).toBe(true);
      const paidAgain = simulatorMoney(sim, again.batchId).byRow;
      expect(paidAgain.has('a')).toBe(false);
      expect(paidAgain.has('b')).toBe(false);
    } finally {
      await ledger.close();
    }
  }, 120_000);
});
