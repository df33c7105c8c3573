import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import type { ServiceConfig } from '../../src/api/service-config';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import type { BatchProgress } from '../../src/model';
import { cancelSignal, progressQuery } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Records shaped otherwise than contract-defaults.md's, on the dev server against the simulator (its `records`
 * switches):
 * - images under another path (`result.files[].href`): found by the tolerant search with the default settings
 *   (each image says it was discovered, and where), and at that path once `IMAGEGEN_IMAGE_FIELDS` names it; the file
 *   on disk is the very file the record points at;
 * - the status under another name (`state`): read once `IMAGEGEN_STATUS_FIELDS` names it; without it, no row is
 *   taken for a success, and the row's error names the record's fields and the setting.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-shapes-'));
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ROWS = ['id,prompt,num_images', 'one,"a lighthouse on a cliff at dusk",1', 'two,"a red fox in fresh snow",2'];
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

interface Jsonl {
  row_id: string;
  state: string;
  error: string | null;
  images: { path: string; sha256: string; bytes: number; url: string; source?: string }[];
  creation_ids: string[];
}

async function startSim(records: SimulatorConfigInput['records']): Promise<Simulator> {
  const sim = await startSimulator({
    records,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
  closers.push(() => sim.close());
  return sim;
}

/** Runs {@link ROWS} on a worker with `config`, writes the results and answers the batch's end and its rows. */
async function runBatch(
  sim: Simulator,
  config: Partial<ServiceConfig>,
  maxPollWaitMs?: number,
  options: { cancelWhenPaused?: boolean } = {},
): Promise<{ progress: BatchProgress; rows: Record<string, Jsonl>; out: string; paused?: BatchProgress }> {
  const folder = await mkdtemp(path.join(dir, 'run-'));
  const file = path.join(folder, 'prompts.csv');
  await writeFile(file, `${ROWS.join('\n')}\n`);
  const out = path.join(folder, 'out');
  const batchId = `s${randomUUID().slice(0, 8)}`;
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: folder,
    prefix: 'shapes',
    config,
  });
  let paused: BatchProgress | undefined;
  const progress = await worker.runUntil(async () => {
    const { handle } = await startOrAttachBatch({
      ledger,
      client: env().client,
      taskQueue,
      batchId,
      file,
      outDir: out,
      defaultModel: 'flux-dev',
      concurrency: 2,
      ...(maxPollWaitMs === undefined ? {} : { maxPollWaitMs }),
    });
    if (options.cancelWhenPaused) {
      for (let i = 0; i < 200 && paused?.status !== 'paused'; i++) {
        await new Promise((r) => setTimeout(r, 200));
        paused = await handle.query(progressQuery);
      }
      await handle.signal(cancelSignal);
    }
    const ended = await handle.result();
    await results({ client: env().client, batchId, ledger });
    return ended;
  });
  const lines = (await readFile(path.join(out, 'results.jsonl'), 'utf8')).trim().split('\n');
  const rows = Object.fromEntries(lines.map((l) => JSON.parse(l) as Jsonl).map((r) => [r.row_id, r]));
  return { progress, rows, out, ...(paused ? { paused } : {}) };
}

/** The image URLs of a creation record in the `nested` shape. */
function nestedUrls(record: object): string[] {
  return ((record as { result?: { files?: { href: string }[] } }).result?.files ?? []).map((f) => f.href);
}

describe('records shaped otherwise', { timeout: 120_000 }, () => {
  it.each([
    ['found by the search with the default settings', {}, /^result\.files\[\d\]\.href \(discovered\)$/],
    [
      'read at the path IMAGEGEN_IMAGE_FIELDS names',
      { imageFields: ['result.files[].href'] },
      /^result\.files\[\d\]\.href$/,
    ],
  ] as const)('images under result.files[].href: %s, each the file the record points at', async (_, config, source) => {
    const sim = await startSim({ imageShape: 'nested' });
    const { progress, rows, out } = await runBatch(sim, config);
    expect(progress.counts).toMatchObject({ succeeded: 2, images_unsaved: 0 });
    for (const [rowId, count] of [
      ['one', 1],
      ['two', 2],
    ] as const) {
      const row = rows[rowId]!;
      expect(row.state).toBe('succeeded');
      const urls = nestedUrls(sim.creation(row.creation_ids[0]!)!);
      expect(urls).toHaveLength(count);
      expect(row.images).toHaveLength(count);
      for (const [n, image] of row.images.entries()) {
        expect(image.source).toMatch(source);
        expect(image.url).toBe(urls[n]);
        const onDisk = await readFile(path.join(out, image.path));
        const served = Buffer.from(await (await fetch(urls[n]!)).arrayBuffer());
        expect(onDisk.equals(served)).toBe(true);
        expect(sha(onDisk)).toBe(image.sha256);
      }
    }
  });

  it('the status under "state": read once IMAGEGEN_STATUS_FIELDS names it', async () => {
    const sim = await startSim({ statusField: 'state' });
    const { progress, rows } = await runBatch(sim, { statusFields: ['state', 'status'] });
    expect(progress.counts).toMatchObject({ succeeded: 2 });
    expect(rows.two!.images).toHaveLength(2);
  });

  it('the status under "state" with the default settings: the canary pauses the batch, its error says where to look', async () => {
    const sim = await startSim({ statusField: 'state' });
    const { progress, rows, paused } = await runBatch(sim, {}, 3_000, { cancelWhenPaused: true });
    // The first row went alone and ended unknown: the batch paused before a second request.
    expect(paused).toMatchObject({ started: 1, waiting: { kind: 'stop_loss', trip: { breaker: 'canary' } } });
    expect(progress.counts).toMatchObject({ succeeded: 0, unknown: 1, not_run: 1 });
    expect(rows.two?.state).toBe('not_started');
    for (const row of [rows.one!]) {
      expect(row.state).not.toBe('succeeded');
      expect(row.images).toEqual([]);
      expect(row.creation_ids).toHaveLength(1);
      expect(row.error).toContain('without a creation status');
      expect(row.error).toContain('IMAGEGEN_STATUS_FIELDS');
      expect(row.error).toMatch(/top-level fields: [^)]*\bstate\b/);
    }
  });
});
