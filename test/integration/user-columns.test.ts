import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { loadServiceConfig } from '../../src/config/service-config';
import { type ServiceConfig } from '../../src/api/service-config';
import type { UserColumns } from '../../src/model';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * Columns the user owns, end to end on the dev server and the simulator: carried columns come back unchanged in
 * results.csv, results.jsonl and the gallery for every row; a body renamed, nested, with template fields and a
 * row's own column, is accepted by a simulator switched to that layout.
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
const sims: Simulator[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-columns-'));
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

const FAST: SimulatorConfigInput = {
  generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
  limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
};

// Cells with commas, quotes, spaces, HTML and non-ASCII text: carried exactly as written.
const SKUS = ['SKU-001', ' SKU 002 ', 'SKU,003', 'SKU "004"', '<b>SKU&005</b>', 'sku-ü-006'];
const CAMPAIGNS = ['spring-2026', 'summer', '', 'black friday', "it's <script>", 'q3'];
const csvField = (v: string) => (/[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);

async function runBatch(
  sim: Simulator,
  lines: string[],
  userColumns: UserColumns,
  config: Partial<ServiceConfig> = {},
) {
  const folder = await mkdtemp(path.join(dir, 'run-'));
  const file = path.join(folder, 'prompts.csv');
  await writeFile(file, `${lines.join('\n')}\n`);
  const batchId = `c${randomUUID().slice(0, 8)}`;
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl: sim.baseUrl,
    outputRoot: folder,
    prefix: 'columns',
    config,
  });
  return worker.runUntil(async () => {
    const { handle } = await startOrAttachBatch({
      ledger,
      client: env().client,
      taskQueue,
      batchId,
      file,
      outDir: path.join(folder, 'out'),
      concurrency: 3,
      userColumns,
    });
    const progress = await handle.result();
    const written = await results({ client: env().client, batchId, ledger });
    const jsonl = (await readFile(written.resultsJsonl, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const csv = parse<Record<string, string>>(await readFile(written.resultsCsv, 'utf8'), { columns: true });
    const gallery = await readFile(written.gallery, 'utf8');
    return { progress, jsonl, csv, gallery };
  });
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

describe('columns of your own', () => {
  it('carries two extra columns unchanged into results.csv, results.jsonl and the gallery, for every row', async () => {
    const sim = await startSimulator(FAST);
    sims.push(sim);
    const lines = [
      'id,sku,prompt,model,campaign',
      ...SKUS.map((sku, i) =>
        [`r${i}`, csvField(sku), `a watercolour harbour at dawn number ${i}`, 'sdxl', csvField(CAMPAIGNS[i]!)].join(
          ',',
        ),
      ),
    ];
    const run = await runBatch(sim, lines, { carry: ['sku', 'campaign'] });
    expect(run.progress.counts.succeeded).toBe(SKUS.length);

    expect(run.jsonl.map((l) => [l.row_id, l.state, l.columns])).toEqual(
      SKUS.map((sku, i) => [`r${i}`, 'succeeded', { sku, campaign: CAMPAIGNS[i] }]),
    );
    expect(Object.keys(run.csv[0]!).slice(-2)).toEqual(['col:sku', 'col:campaign']);
    expect(run.csv.map((r) => [r.row_id, r['col:sku'], r['col:campaign']])).toEqual(
      SKUS.map((sku, i) => [`r${i}`, sku, CAMPAIGNS[i]]),
    );
    for (const [i, sku] of SKUS.entries()) {
      const card = run.gallery.split('<figure').find((c) => c.includes(`data-row="r${i}"`))!;
      expect(card).toContain(`<dt>sku</dt><dd>${escapeHtml(sku)}</dd>`);
      expect(card).toContain(`<dt>campaign</dt><dd>${escapeHtml(CAMPAIGNS[i]!)}</dd>`);
    }
    expect(run.gallery).not.toContain('<script>');
    expect(run.gallery).not.toContain('<b>SKU');
  }, 120_000);

  it('sends a renamed, nested body with template fields and a mapped column, which the switched simulator accepts', async () => {
    const sim = await startSimulator({
      ...FAST,
      requestLayout: {
        fields: { prompt: 'input.text', num_images: 'n' },
        extraFields: { 'input.lang': 'required', output_format: 'required', 'meta.sku': 'required' },
      },
    });
    sims.push(sim);
    const config = loadServiceConfig({
      IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text,num_images=n',
      IMAGEGEN_REQUEST_TEMPLATE: '{"input":{"lang":"en"},"output_format":"png"}',
    });
    const lines = [
      'id,prompt,model,num_images,sku',
      'm1,a lighthouse on a cliff at dusk,sdxl,2,SKU-1',
      'm2,a red fox in fresh snow,sdxl,1,SKU-2',
      // No sku: the required field is missing, the simulator says 400, the row fails and says why.
      'm3,a paper boat on a pond,sdxl,1,',
    ];
    const run = await runBatch(
      sim,
      lines,
      { send: { sku: 'meta.sku' } },
      {
        requestFields: config.requestFields,
        requestTemplate: config.requestTemplate,
      },
    );
    const byId = new Map(run.jsonl.map((l) => [l.row_id, l]));
    expect(byId.get('m1')).toMatchObject({ state: 'succeeded', columns: { sku: 'SKU-1' } });
    expect((byId.get('m1')!.images as unknown[]).length).toBe(2); // num_images read from `n`
    expect(byId.get('m2')).toMatchObject({ state: 'succeeded' });
    expect(byId.get('m3')).toMatchObject({ state: 'failed' });
    expect(String(byId.get('m3')!.error)).toContain('meta.sku');
  }, 120_000);
});
