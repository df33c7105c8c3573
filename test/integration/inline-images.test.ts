import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceConfig } from '../../src/api/service-config';
import { startOrAttachBatch } from '../../src/cli/batches';
import { results } from '../../src/cli/commands/results';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';
import { batchWorkflowId, parseIdempotencyKey, promptWorkflowId, type BatchProgress } from '../../src/model';
import type { LedgerStore } from '../../src/ledger';
import { progressQuery, resumeSignal } from '../../src/workflows';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';
import { tempLedger } from '../helpers/ledger';

/**
 * Where the images are, and a success without one, on the dev server against the simulator:
 * - inline images (`data[].b64_json` base64, `images[].url` as `data:` URIs) land on disk with their checksums, and
 *   their bytes never reach Temporal history, the ledger or the results;
 * - a success that shows no image stops the batch at its first row (the canary), its message naming the record's
 *   fields (never a value) and `IMAGEGEN_IMAGE_FIELDS`; once the setting is right, `resume` saves that row's images,
 *   submitting nothing for it, and the batch fans out; while nothing can be found it stops again;
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
    const { handle } = await start(f, ledger, taskQueue);
    const progress = await handle.result();
    await results({ client: env().client, batchId: f.batchId, ledger });
    return progress;
  });
}

/** Settings that switch image discovery off: only the configured paths are read. */
const DISCOVERY_OFF: Partial<ServiceConfig> = { imageDiscovery: false };

/**
 * Starts the batch of {@link ROWS} on a worker with `config` (or, with `resumeOn`, resumes it on a new worker on that
 * queue), and returns its progress once it paused; the worker stops then.
 */
async function runUntilPaused(
  f: Folder,
  baseUrl: string,
  config: Partial<ServiceConfig> = {},
  options: { resumeOn?: string } = {},
): Promise<{ progress: BatchProgress; taskQueue: string }> {
  const { worker, taskQueue, ledger } = await simulatorWorker(env, {
    baseUrl,
    outputRoot: f.folder,
    prefix: 'inline',
    config,
    ledger: await tempLedger(f.ledgerFile),
    ...(options.resumeOn ? { taskQueue: options.resumeOn } : {}),
  });
  const progress = await worker.runUntil(async () => {
    const handle = options.resumeOn
      ? env().client.workflow.getHandle(batchWorkflowId(f.batchId))
      : (await start(f, ledger, taskQueue)).handle;
    if (options.resumeOn) await handle.signal(resumeSignal);
    // A resume clears the stop at once; the row then meets it again.
    await new Promise((r) => setTimeout(r, 500));
    for (let i = 0; i < 100; i++) {
      const p = await handle.query(progressQuery);
      if (p.status === 'paused') return p;
      await new Promise((r) => setTimeout(r, 300));
    }
    throw new Error('the batch never paused');
  });
  return { progress, taskQueue };
}

/** Resumes the batch on a new worker with `config` on `taskQueue`, to its end, and writes its results. */
async function resumeToEnd(f: Folder, baseUrl: string, taskQueue: string, config: Partial<ServiceConfig>) {
  const { worker, ledger } = await simulatorWorker(env, {
    baseUrl,
    outputRoot: f.folder,
    prefix: 'resume',
    config,
    ledger: await tempLedger(f.ledgerFile),
    taskQueue,
  });
  return worker.runUntil(async () => {
    const handle = env().client.workflow.getHandle(batchWorkflowId(f.batchId));
    await handle.signal(resumeSignal);
    const progress = (await handle.result()) as BatchProgress;
    await results({ client: env().client, batchId: f.batchId, ledger });
    return progress;
  });
}

function start(f: Folder, ledger: LedgerStore, taskQueue: string) {
  return startOrAttachBatch({
    ledger,
    client: env().client,
    taskQueue,
    batchId: f.batchId,
    file: f.file,
    outDir: f.out,
    defaultModel: 'flux-dev',
    concurrency: 2,
  });
}

/** Creations the simulator made for the batch, per row: each one a submission that was charged. */
function creationsByRow(sim: Simulator, batchId: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of sim.charges.byCreation()) {
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
  it('`none`: the canary pauses the batch, naming the record fields and the setting; nothing more is paid', async () => {
    const sim = await startSim({ imageShape: 'none' });
    const f = await newFolder();
    const { progress, taskQueue } = await runUntilPaused(f, sim.baseUrl);
    // The first row went alone and its paid success showed no image: the batch stops before a second request.
    expect(progress.started).toBe(1);
    expect(progress.waiting).toMatchObject({ kind: 'batch_stop', details: { reason: 'images_refused' } });
    const message = progress.waiting?.kind === 'batch_stop' ? progress.waiting.details.message : '';
    expect(message).toContain('shows no image');
    expect(message).toContain('IMAGEGEN_IMAGE_FIELDS (images[].url');
    expect(message).toMatch(/its top-level fields are id, status, model, prompt, .*cost_usd/);
    expect(message).toContain(`imagebatch resume ${f.batchId}`);
    // Field names, never values: the record echoes the prompt and the model.
    expect(message).not.toContain('lighthouse');
    expect(message).not.toContain('flux-dev');
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1 });

    // Resumed with nothing the settings can find: it stops again, and nothing is submitted.
    const again = await runUntilPaused(f, sim.baseUrl, {}, { resumeOn: taskQueue });
    expect(again.progress.waiting).toMatchObject({ kind: 'batch_stop', details: { reason: 'images_refused' } });
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1 });
  });

  it('images under a name outside the settings, discovery off: one row paid and paused; the setting and resume save it, paying nothing more for it', async () => {
    const sim = await startSim({ imageShape: 'default' });
    // A service that puts its image URLs at artifacts.renders[].location.
    const proxy = await startRewritingProxy(sim.baseUrl, (record) => {
      const { images, ...rest } = record as { images?: { url: string; width: number }[] };
      return images
        ? { ...rest, artifacts: { renders: images.map((i) => ({ location: i.url, w: i.width })) } }
        : record;
    });
    const f = await newFolder();
    const wrong: Partial<ServiceConfig> = { imageFields: ['artifacts.render[].location'], ...DISCOVERY_OFF };
    const { progress, taskQueue } = await runUntilPaused(f, proxy.baseUrl, wrong);
    expect(progress.started).toBe(1);
    const message = progress.waiting?.kind === 'batch_stop' ? progress.waiting.details.message : '';
    expect(message).toContain('IMAGEGEN_IMAGE_FIELDS (artifacts.render[].location)');
    expect(message).toMatch(/its top-level fields are id, status, .*artifacts/);
    expect(message).not.toContain(sim.filesUrl);
    // Its submission, and the canary's check of its key: a replay, charged nothing.
    expect(proxy.submissions()).toBe(2);
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1 });

    // Right: the canary's own creation is fetched again and its images saved; then the batch fans out.
    const right = { imageFields: ['artifacts.renders[].location'], ...DISCOVERY_OFF };
    const done = await resumeToEnd(f, proxy.baseUrl, taskQueue, right);
    expect(done.counts).toMatchObject({ succeeded: 2, images_unsaved: 0 });
    expect(proxy.submissions()).toBe(3);
    expect(creationsByRow(sim, f.batchId)).toEqual({ one: 1, two: 1 });
    const after = await readResults(f);
    expect(after.unresolved).toEqual([]);
    for (const rowId of ['one', 'two']) {
      const row = after.byRow[rowId]!;
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
