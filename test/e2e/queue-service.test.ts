import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { QUEUE_SERVICE_PROFILE, startSimulator, type Simulator } from '../../src/simulator';
import type { ServiceConfig } from '../../src/api/service-config';
import { batchWorkflowId, parseIdempotencyKey, type BatchProgress } from '../../src/model';
import { tempLedger } from '../helpers/ledger';
import { progressQuery, resumeSignal } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Issue #30's acceptance: a batch against an independent queue-style service written to the interface (the simulator's
 * queue-service profile: records wrapped in `data`, the image URL one level down under a name no list holds, beside a
 * link to a web page, the cost as `{ amount: "0.04", currency: "USD" }`, the URL redirecting to a file served as
 * `application/octet-stream` that expires 20 s after the creation ended), with the default settings. A tester saw 56
 * of 56 paid successes save no image, their charge unknown. Here every row saves its image, with its cost known; and
 * with discovery off, the batch pays its first row alone, pauses, and after the setting and a resume pays nothing
 * more for that row.
 */
const env = useTestEnv(() => createLocalEnv());
const ROWS = 50;
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-queue-'));
  sim = await startSimulator({
    ...QUEUE_SERVICE_PROFILE,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 500, burst: 500, accountConcurrency: null },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Jsonl {
  row_id: string;
  state: string;
  error: string | null;
  charged_usd: number | null;
  images: { path: string; sha256: string; bytes: number; url: string; source?: string }[];
  keys: { charged_usd: number | null; price_source: string | null }[];
}

describe('a batch against the queue-service profile, default settings', { timeout: 180_000 }, () => {
  it(`${ROWS} rows: ${ROWS} succeeded, ${ROWS} images on disk, each with its cost from its record`, async () => {
    const file = path.join(dir, 'prompts.csv');
    const lines = Array.from({ length: ROWS }, (_, i) => `r${i},"a lighthouse at dusk, study ${i}"`);
    await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
    const out = path.join(dir, 'out');
    const batchId = `q${randomUUID().slice(0, 8)}`;
    const { worker, taskQueue, ledger } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'queue',
    });
    const progress = await worker.runUntil(async () => {
      const { handle } = await startOrAttachBatch({
        ledger,
        client: env().client,
        taskQueue,
        batchId,
        file,
        outDir: out,
        defaultModel: 'flux-dev',
        concurrency: 10,
      });
      const ended = await handle.result();
      await results({ client: env().client, batchId, ledger });
      return ended;
    });
    expect(progress.counts).toMatchObject({ succeeded: ROWS, images_unsaved: 0 });
    const rows = (await readFile(path.join(out, 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Jsonl);
    expect(rows).toHaveLength(ROWS);
    for (const row of rows) {
      expect([row.row_id, row.state, row.error]).toEqual([row.row_id, 'succeeded', null]);
      expect(row.charged_usd).toBe(0.04);
      expect(row.keys).toEqual([expect.objectContaining({ charged_usd: 0.04, price_source: 'creation' })]);
      expect(row.images).toHaveLength(1);
      const [image] = row.images;
      expect(image?.source).toBe('result.artifact_location (discovered)');
      const onDisk = await readFile(path.join(out, image!.path));
      expect(onDisk.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
      expect(createHash('sha256').update(onDisk).digest('hex')).toBe(image!.sha256);
    }
    // The web page each record links to was fetched as a candidate and dropped; the API key went to no file request.
    const seen = sim.filesRequests();
    expect(seen.some((q) => q.path.startsWith('/jobs/'))).toBe(true);
    expect(seen.every((q) => q.headers.authorization === undefined && q.headers['x-api-key'] === undefined)).toBe(true);
  });
});

describe('the same service with discovery off', { timeout: 180_000 }, () => {
  it(`pays one row, pauses before a second request; the setting and resume save it, paying nothing more for it`, async () => {
    const file = path.join(dir, 'prompts-off.csv');
    const lines = Array.from({ length: ROWS }, (_, i) => `r${i},"a harbour at dawn, study ${i}"`);
    await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
    const out = path.join(dir, 'out-off');
    const batchId = `o${randomUUID().slice(0, 8)}`;
    const ledger = await tempLedger();
    const worker = (config: Partial<ServiceConfig>, taskQueue?: string) =>
      simulatorWorker(env, {
        baseUrl: sim.baseUrl,
        outputRoot: dir,
        prefix: 'queue-off',
        config,
        ledger,
        ...(taskQueue ? { taskQueue } : {}),
      });
    const first = await worker({ imageDiscovery: false });
    const paused = await first.worker.runUntil(async () => {
      const { handle } = await startOrAttachBatch({
        ledger: first.ledger,
        client: env().client,
        taskQueue: first.taskQueue,
        batchId,
        file,
        outDir: out,
        defaultModel: 'flux-dev',
        concurrency: 10,
      });
      for (let i = 0; i < 100; i++) {
        const p: BatchProgress = await handle.query(progressQuery);
        if (p.status === 'paused') return p;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error('the batch never paused');
    });
    expect(paused.started).toBe(1);
    expect(paused.waiting).toMatchObject({ kind: 'batch_stop', details: { reason: 'images_refused' } });
    expect(creations(batchId)).toEqual({ r0: 1 });

    // The setting, on a new worker of the same queue; then resume.
    const second = await worker({ imageDiscovery: false, imageFields: ['result.artifact_location'] }, first.taskQueue);
    const done = await second.worker.runUntil(async () => {
      const handle = env().client.workflow.getHandle(batchWorkflowId(batchId));
      await handle.signal(resumeSignal);
      const ended = (await handle.result()) as BatchProgress;
      await results({ client: env().client, batchId, ledger: second.ledger });
      return ended;
    });
    expect(done.counts).toMatchObject({ succeeded: ROWS, images_unsaved: 0 });
    // One creation per row: the first row's own was fetched again, never paid twice.
    const made = creations(batchId);
    expect(Object.keys(made)).toHaveLength(ROWS);
    expect(Object.values(made).every((n) => n === 1)).toBe(true);
    const r0 = (await readFile(path.join(out, 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Jsonl)
      .find((r) => r.row_id === 'r0');
    expect(r0).toMatchObject({ state: 'succeeded', charged_usd: 0.04 });
    expect(r0?.images[0]?.source).toBe('result.artifact_location');
  });
});

/** Creations the simulator made for the batch, per row: each one a submission that was charged. */
function creations(batchId: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of sim.charges.byCreation()) {
    const key = parseIdempotencyKey(c.idempotencyKey ?? '');
    if (key?.batchId === batchId) out[key.rowId] = (out[key.rowId] ?? 0) + 1;
  }
  return out;
}
