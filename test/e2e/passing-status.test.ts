import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { PASSING_STATUS_PROFILE, startSimulator, type Simulator } from '../../src/simulator';
import type { BatchProgress } from '../../src/model';
import { progressQuery } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Issue #42, point 5: a status outside every set (`uploading`, between running and success) on records that carry a
 * logs URL served as text/plain and the API's own links. The tester's batch stopped at once ("its record shows an
 * image at logs (discovered)"). With the default settings, no byte of those URLs is an image, so the status is waited
 * out: no batch stop, and every row succeeds with its image.
 */
const env = useTestEnv(() => createLocalEnv());
const ROWS = 30;
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-passing-'));
  sim = await startSimulator({
    ...PASSING_STATUS_PROFILE,
    // Running 1.6 to 2.5 s, the last 1.5 s of it `uploading`: polls 200 ms apart see the word on every creation.
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 1_600, maxMs: 2_500 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 500, burst: 500, accountConcurrency: null },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a batch against the passing-status profile, default settings', { timeout: 180_000 }, () => {
  it(`${ROWS} rows: 0 batch stops, ${ROWS} succeeded, each with its image`, async () => {
    const file = path.join(dir, 'prompts.csv');
    const lines = Array.from({ length: ROWS }, (_, i) => `r${i},"a kite over the dunes, study ${i}"`);
    await writeFile(file, `id,prompt\n${lines.join('\n')}\n`);
    const out = path.join(dir, 'out');
    const batchId = `p${randomUUID().slice(0, 8)}`;
    const { worker, taskQueue, ledger } = await simulatorWorker(env, {
      baseUrl: sim.baseUrl,
      outputRoot: dir,
      prefix: 'passing',
    });
    const stops: string[] = [];
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
      // A stopped batch waits for a person: a look that finds it paused ends the test's wait.
      for (let i = 0; i < 600; i++) {
        const p: BatchProgress = await handle.query(progressQuery);
        if (p.status === 'paused' || p.waiting?.kind === 'batch_stop') {
          stops.push(JSON.stringify(p.waiting));
          break;
        }
        if (Object.values(p.counts).reduce((a, b) => a + b, 0) >= ROWS) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      if (stops.length > 0) return undefined;
      const ended = await handle.result();
      await results({ client: env().client, batchId, ledger });
      return ended;
    });
    expect(stops).toEqual([]);
    expect(progress?.counts).toMatchObject({ succeeded: ROWS, images_unsaved: 0, unknown: 0, failed: 0 });
    const rows = (await readFile(path.join(out, 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { state: string; images: { path: string; source?: string }[] });
    expect(rows).toHaveLength(ROWS);
    for (const row of rows) {
      expect(row.state).toBe('succeeded');
      expect(row.images.map((i) => i.source)).toEqual(['images[0].url']);
      const onDisk = await readFile(path.join(out, row.images[0]!.path));
      expect(onDisk.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    }
    // The creations polled while they showed the word had their logs fetched to judge it (once each), without the API
    // key; none was saved (one image a row, above).
    const seen = sim.filesRequests();
    const logs = seen.filter((q) => q.path.startsWith('/logs/')).map((q) => q.path);
    expect(logs.length).toBeGreaterThan(ROWS / 2);
    expect(new Set(logs).size).toBe(logs.length);
    expect(seen.every((q) => q.headers.authorization === undefined && q.headers['x-api-key'] === undefined)).toBe(true);
  });
});
