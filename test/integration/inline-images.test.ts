import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceConfig } from '../../src/config/service-config';
import { startOrAttachBatch } from '../../src/cli/batches';
import { reconcile } from '../../src/cli/commands/reconcile';
import { results } from '../../src/cli/commands/results';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { parseIdempotencyKey, promptWorkflowId, type BatchProgress } from '../../src/model';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';
import { tempLedger } from '../helpers/ledger';

/**
 * Where the images are, and a success without one, on the dev server against the simulator:
 * - inline images (`data[].b64_json` base64, `images[].url` as `data:` URIs) land on disk with their checksums, and
 *   their bytes never reach Temporal history, the ledger or the results;
 * - a success that shows no image ends `images_unsaved`, its message naming the record's fields (never a value) and
 *   `IMAGEGEN_IMAGE_FIELDS`; `imagebatch reconcile` then saves its images once the setting is right, submitting
 *   nothing, and reports the row (submitting nothing) while nothing can be found;
 * - a creation that brings fewer images than `num_images` asked for is flagged in the results (`images_short`).
 */
const env = useTestEnv(() => createLocalEnv());
let dir: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-inline-'));
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ROWS = [
  'id,prompt,num_images',
  'one,"a lighthouse on a cliff at dusk, oil painting",1',
  'two,"a red fox in fresh snow",2',
];
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function startSim(records: SimulatorConfigInput['records']): Promise<Simulator> {
  const sim = await startSimulator({
    records,
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 150 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 200, burst: 200, accountConcurrency: null },
  });
  closers.push(() => sim.close());
  return sim;
}

interface Jsonl {
  row_id: string;
  state: string;
  error: string | null;
  images: { path: string; sha256: string; bytes: number; url: string; source?: string }[];
  images_asked: number;
  images_short: number | null;
  creation_ids: string[];
}

interface Folder {
  folder: string;
  out: string;
  file: string;
  batchId: string;
  /** The ledger store's file: every worker of the folder's batch and its reconcile use it. */
  ledgerFile: string;
}

async function newFolder(): Promise<Folder> {
  const folder = await mkdtemp(path.join(dir, 'run-'));
  const file = path.join(folder, 'prompts.csv');
  await writeFile(file, `${ROWS.join('\n')}\n`);
  const batchId = `i${randomUUID().slice(0, 8)}`;
  return { folder, file, out: path.join(folder, 'out'), batchId, ledgerFile: path.join(folder, 'ledger.sqlite') };
}

async function readResults(f: Folder) {
  const jsonl = (await readFile(path.join(f.out, 'results.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Jsonl);
  const csv = parse<Record<string, string>>(await readFile(path.join(f.out, 'results.csv'), 'utf8'), { columns: true });
  const unresolved = parse<Record<string, string>>(await readFile(path.join(f.out, 'unresolved.csv'), 'utf8'), {
    columns: true,
  });
  return { jsonl, csv, unresolved, byRow: Object.fromEntries(jsonl.map((l) => [l.row_id, l])) };
}

/** Runs the batch of {@link ROWS} on a worker with `config` against `baseUrl`, and writes its results. */
async function runBatch(f: Folder, baseUrl: string, config: Partial<ServiceConfig> = {}): Promise<BatchProgress> {
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl,
    outputRoot: f.folder,
    prefix: 'inline',
    config,
    ledger: await tempLedger(f.ledgerFile),
  });
  return worker.runUntil(async () => {
    const { handle } = await startOrAttachBatch({
      ledger,
      client: env().client,
      taskQueue,
      batchId: f.batchId,
      file: f.file,
      outDir: f.out,
      defaultModel: 'flux-dev',
      concurrency: 2,
    });
    const progress = await handle.result();
    await results({ client: env().client, batchId: f.batchId, ledger });
    return progress;
  });
}

/** `imagebatch reconcile` of the batch, on a (new) worker with `config`. */
async function reconcileOn(f: Folder, baseUrl: string, config: Partial<ServiceConfig> = {}) {
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl,
    outputRoot: f.folder,
    prefix: 'rec',
    config,
    ledger: await tempLedger(f.ledgerFile),
  });
  return worker.runUntil(() => reconcile({ client: env().client, taskQueue, batchId: f.batchId, ledger }));
}

/** Creations the simulator made for the batch, per row: each one a submission that was charged. */
function creationsByRow(sim: Simulator, batchId: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of sim.ledger.byCreation()) {
    const key = parseIdempotencyKey(c.idempotencyKey ?? '');
    if (key?.batchId === batchId) out[key.rowId] = (out[key.rowId] ?? 0) + 1;
  }
  return out;
}

/** Every payload of a workflow's history, as text (the default converter writes JSON). */
async function historyText(workflowId: string): Promise<string> {
  const history = await env().client.workflow.getHandle(workflowId).fetchHistory();
  const parts: string[] = [];
  const walk = (v: unknown): void => {
    if (v instanceof Uint8Array) parts.push(Buffer.from(v).toString('utf8'));
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(walk);
    else if (typeof v === 'string') parts.push(v);
  };
  walk(history);
  return parts.join('\n');
}

/** The bytes of each inline image of a creation record, in order, whatever its shape. */
function inlineBytes(record: object): Buffer[] {
  const r = record as { data?: { b64_json: string }[]; images?: { url: string }[] };
  if (r.data) return r.data.map((d) => Buffer.from(d.b64_json, 'base64'));
  return (r.images ?? []).map((i) => Buffer.from(i.url.slice(i.url.indexOf(',') + 1), 'base64'));
}

describe('inline images', { timeout: 120_000 }, () => {
  it.each([
    ['inline-base64', /^data\[\d\]\.b64_json/],
    ['data-uri', /^images\[\d\]\.url/],
  ] as const)(
    '%s: saved on disk with their checksums, never in history, the ledger or the results',
    async (shape, source) => {
      const sim = await startSim({ imageShape: shape });
      const f = await newFolder();
      const progress = await runBatch(f, sim.baseUrl);
      expect(progress.counts).toMatchObject({ succeeded: 2, images_unsaved: 0 });
      const { byRow, csv } = await readResults(f);
      let secrets: string[] = [];
      for (const [rowId, count] of [
        ['one', 1],
        ['two', 2],
      ] as const) {
        const row = byRow[rowId]!;
        expect(row).toMatchObject({ state: 'succeeded', images_asked: count, images_short: 0 });
        const record = sim.creation(row.creation_ids[0]!)!;
        const served = inlineBytes(record);
        expect(served).toHaveLength(count);
        expect(row.images).toHaveLength(count);
        for (const [n, image] of row.images.entries()) {
          const onDisk = await readFile(path.join(f.out, image.path));
          // The file is the very bytes the record carried, and the checksum is the file's.
          expect(onDisk.equals(served[n]!)).toBe(true);
          expect(sha(onDisk)).toBe(image.sha256);
          expect(image.bytes).toBe(onDisk.length);
          expect(image.path).toMatch(new RegExp(`^${rowId}/${row.creation_ids[0]}-${n}\\.png$`));
          expect(image.source).toMatch(source);
          expect(image.url).toBe(`data:image/png;base64 (${onDisk.length} bytes) at ${image.source}`);
          secrets.push(served[n]!.toString('base64').slice(100, 160));
        }
      }
      expect(csv.map((r) => r.images_short)).toEqual(['0', '0']);
      secrets = secrets.filter((s) => s.length === 60);
      expect(secrets.length).toBe(3);
      // Not a fragment of any image's base64 in the row workflows' histories, the ledger or the results.
      const stored = [
        await historyText(promptWorkflowId(f.batchId, 'one')),
        await historyText(promptWorkflowId(f.batchId, 'two')),
        // The store's file and its write-ahead log, as bytes: whatever SQLite keeps of it.
        await readFile(f.ledgerFile, 'latin1'),
        await readFile(`${f.ledgerFile}-wal`, 'latin1').catch(() => ''),
        await readFile(path.join(f.out, 'results.jsonl'), 'utf8'),
        await readFile(path.join(f.out, 'results.csv'), 'utf8'),
      ].join('\n');
      for (const s of secrets) expect(stored).not.toContain(s);
      expect(stored).toContain('data:image/png;base64 (');
    },
  );
});

describe('a success without an image', { timeout: 180_000 }, () => {
  it('`none`: images_unsaved with the record fields and the setting named; reconcile reports it, submitting nothing', async () => {
    const sim = await startSim({ imageShape: 'none' });
    const f = await newFolder();
    const progress = await runBatch(f, sim.baseUrl);
    expect(progress.counts).toMatchObject({ succeeded: 0, images_unsaved: 2 });
    const first = await readResults(f);
    const one = first.byRow.one!;
    expect(one.images).toEqual([]);
    expect(one.error).toContain('shows no image');
    expect(one.error).toContain('IMAGEGEN_IMAGE_FIELDS (images[].url');
    expect(one.error).toMatch(/its top-level fields are id, status, model, prompt, .*cost_usd/);
    expect(one.error).toContain(`imagebatch reconcile ${f.batchId}`);
    // Field names, never values: the record echoes the prompt and the model.
    expect(one.error).not.toContain('lighthouse');
    expect(one.error).not.toContain('flux-dev');
    expect(first.unresolved.map((r) => r.id)).toEqual(['one', 'two']);
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1, two: 1 });

    // Nothing the setting can find: reconcile polls the creations again and reports both rows, with the reason.
    const rec = await reconcileOn(f, sim.baseUrl);
    expect(rec.summary).toMatchObject({ examined: 2, resolved: 0, reported: 2 });
    for (const row of rec.summary.rows) {
      expect(row).toMatchObject({ before: 'images_unsaved', after: 'images_unsaved', resolved: false });
      expect(row.note).toContain('shows no image');
    }
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1, two: 1 });
    const after = await readResults(f);
    expect(after.unresolved.map((r) => r.id)).toEqual(['one', 'two']);
    expect(after.byRow.one).toMatchObject({ state: 'images_unsaved', creation_ids: one.creation_ids });
  });

  it('images the settings cannot find: wrong IMAGEGEN_IMAGE_FIELDS, discovery off, then right; reconcile saves them, submitting nothing', async () => {
    const sim = await startSim({ imageShape: 'default' });
    // A service that puts its image URLs at artifacts.renders[].location (discovery would find them: it is off).
    const proxy = await startRewritingProxy(sim.baseUrl, (record) => {
      const { images, ...rest } = record as { images?: { url: string; width: number }[] };
      return images
        ? { ...rest, artifacts: { renders: images.map((i) => ({ location: i.url, w: i.width })) } }
        : record;
    });
    const f = await newFolder();
    const wrong = { imageFields: ['artifacts.render[].location'], imageDiscovery: false };
    const progress = await runBatch(f, proxy.baseUrl, wrong);
    expect(progress.counts).toMatchObject({ succeeded: 0, images_unsaved: 2 });
    const first = await readResults(f);
    expect(first.byRow.two!.error).toContain('IMAGEGEN_IMAGE_FIELDS (artifacts.render[].location)');
    expect(first.byRow.two!.error).toMatch(/its top-level fields are id, status, .*artifacts/);
    expect(first.byRow.two!.error).not.toContain(sim.filesUrl);
    expect(proxy.submissions()).toBe(2);

    // Still wrong: reported again, nothing submitted.
    const stillWrong = await reconcileOn(f, proxy.baseUrl, wrong);
    expect(stillWrong.summary).toMatchObject({ examined: 2, resolved: 0, reported: 2 });
    expect(proxy.submissions()).toBe(2);

    // Right: each row's own creation is fetched again and its images saved. No submission, no new charge.
    const right = await reconcileOn(f, proxy.baseUrl, { imageFields: ['artifacts.renders[].location'] });
    expect(right.summary).toMatchObject({ examined: 2, resolved: 2, reported: 0 });
    // The ledger lists rows in the order they last ended: sorted here.
    expect(right.summary.rows.map((r) => [r.rowId, r.before, r.after]).sort()).toEqual([
      ['one', 'images_unsaved', 'succeeded'],
      ['two', 'images_unsaved', 'succeeded'],
    ]);
    expect(proxy.submissions()).toBe(2);
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1, two: 1 });
    const after = await readResults(f);
    expect(after.unresolved).toEqual([]);
    for (const rowId of ['one', 'two']) {
      const row = after.byRow[rowId]!;
      expect(row.creation_ids).toEqual(first.byRow[rowId]!.creation_ids);
      expect(row).toMatchObject({ state: 'succeeded', images_short: 0 });
      for (const [n, image] of row.images.entries()) {
        expect(image.source).toBe(`artifacts.renders[${n}].location`);
        const served = Buffer.from(await (await fetch(image.url)).arrayBuffer());
        const onDisk = await readFile(path.join(f.out, image.path));
        expect(onDisk.equals(served)).toBe(true);
        expect(sha(onDisk)).toBe(image.sha256);
      }
    }
    expect(after.byRow.two!.images).toHaveLength(2);
  });

  it('a creation that brings fewer images than num_images asked: succeeded, flagged images_short', async () => {
    const sim = await startSim({ imageShape: 'default' });
    const proxy = await startRewritingProxy(sim.baseUrl, (record) => {
      const r = record as { images?: unknown[] };
      return r.images ? { ...r, images: r.images.slice(0, 1) } : record;
    });
    const f = await newFolder();
    const progress = await runBatch(f, proxy.baseUrl);
    expect(progress.counts).toMatchObject({ succeeded: 2 });
    const { byRow, csv } = await readResults(f);
    expect(byRow.one).toMatchObject({ images_asked: 1, images_short: 0 });
    expect(byRow.two).toMatchObject({ images_asked: 2, images_short: 1 });
    expect(byRow.two!.images).toHaveLength(1);
    expect(csv.map((r) => [r.row_id, r.images_short])).toEqual([
      ['one', '0'],
      ['two', '1'],
    ]);
  });
});

/**
 * A loopback proxy in front of the simulator's API that rewrites every creation record a poll returns with `rewrite`
 * (its own content length), and counts submissions (POSTs).
 */
async function startRewritingProxy(
  target: string,
  rewrite: (record: object) => object,
): Promise<{ baseUrl: string; submissions: () => number }> {
  const upstream = new URL(target);
  let posts = 0;
  const server: Server = createServer((req, res) => {
    if (req.method === 'POST') posts += 1;
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer: IncomingMessage) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          let body = Buffer.concat(chunks);
          if (req.method === 'GET' && answer.statusCode === 200 && /\/creations\/[^/]+$/.test(req.url ?? '')) {
            body = Buffer.from(JSON.stringify(rewrite(JSON.parse(body.toString('utf8')) as object)));
          }
          const headers = { ...answer.headers, 'content-length': String(body.length) };
          delete headers['transfer-encoding'];
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(body);
        });
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}${upstream.pathname}`, submissions: () => posts };
}
