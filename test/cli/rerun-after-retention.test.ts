import { createHash } from 'node:crypto';
import { readFile, rm, writeFile, mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_IDEMPOTENCY_HEADER } from '../../src/api/contract';
import { defaultLedger } from '../helpers/ledger';
import { DEMO_API_KEY, FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { BatchProgress } from '../../src/model';
import { WorkerProcess, baseEnv, cli, cliJson, describeRun, ensureDistIsFresh, readCsv } from './helpers';
import { chargedKeys } from './stack';
import { KEYS_KEPT_MS, keysForgotten } from '../helpers/keys-forgotten';

/**
 * A batch run again after Temporal's retention has passed: its row workflows are gone, but the ledger store is kept.
 * Simulated with a second, empty dev server and a new worker on the same simulator and the same store. The store
 * alone must stop every paid row from being submitted (or charged) again, bring back deleted images from their
 * creation, and let `results` write every row.
 */

const BATCH = 'kept';
const TASK_QUEUE = 'imagebatch-rerun';

/** One request the worker sent to the image service, as the counting proxy saw it. */
interface SeenCall {
  method: string;
  path: string;
  key: string | undefined;
}

/** A plain HTTP proxy in front of the simulator's API that records every request: POSTs per key, polls per creation. */
async function startCountingProxy(
  target: URL,
): Promise<{ baseUrl: string; calls: SeenCall[]; close(): Promise<void> }> {
  const calls: SeenCall[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const header = req.headers[DEFAULT_IDEMPOTENCY_HEADER.toLowerCase()];
    calls.push({ method: req.method ?? '', path: req.url ?? '', key: Array.isArray(header) ? header[0] : header });
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${target.pathname}`,
    calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}

let dir: string;
let sim: Simulator;
let proxy: Awaited<ReturnType<typeof startCountingProxy>>;
let server: DevServer | undefined;
let worker: WorkerProcess | undefined;

/** A dev server that knows nothing and a worker on it: what is left of Temporal once its retention has passed. */
async function startTemporalAndWorker(): Promise<Record<string, string>> {
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  const temporal = { TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: TASK_QUEUE };
  worker = await WorkerProcess.start({
    env: baseEnv({
      ...temporal,
      IMAGEGEN_BASE_URL: proxy.baseUrl,
      IMAGEGEN_API_KEY: DEMO_API_KEY,
      IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
    }),
  });
  return baseEnv(temporal);
}

async function stopTemporalAndWorker(): Promise<void> {
  await worker?.stop();
  await server?.stop();
  worker = undefined;
  server = undefined;
}

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-rerun-'));
  sim = await startSimulator({
    seed: 5,
    accounts: [{ id: 'acct', models: ['flux-dev', 'flux-schnell'], keys: [{ id: 'key', key: DEMO_API_KEY }] }],
    generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 500 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
    safety: { genericDeclineProbability: 0 },
    // The service forgets a key after its idempotency window (24 h), long before Temporal's retention (days) passes:
    // here after KEYS_KEPT_MS, so that a key sent again by the second run would be a new creation, charged again.
    // (Long enough for the canary's check of its key, sent once its first answer is known.)
    idempotency: { ttlMs: KEYS_KEPT_MS },
    // Every submission of a "[flaky]" prompt fails at generation (refunded, a retryable failure string).
    scripts: [{ match: '[flaky]', faults: [FaultKind.FailGeneration, FaultKind.FailGeneration] }],
  });
  proxy = await startCountingProxy(new URL(sim.baseUrl));
});

afterAll(async () => {
  await stopTemporalAndWorker();
  await proxy?.close();
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ROWS = [
  'id,prompt,model,num_images',
  'r1,a lighthouse on a basalt cliff at dusk,,2',
  'r2,a red fox curled up in fresh snow,flux-schnell,',
  'r3,a bowl of ramen with steam rising,,',
  'r4,a tram crossing a bridge in the rain,,',
  'r5,a paper boat on a puddle after rain,,',
  'r6,[flaky] a harbour crane at night,,',
  'r7,[unsafe] a dragon over a burning village,,',
  // No row of a model the account lacks: `run --follow` refuses such a file before it starts (run-outcomes.test.ts).
];
const STATES = [
  ['r1', 'succeeded'],
  ['r2', 'succeeded'],
  ['r3', 'succeeded'],
  ['r4', 'succeeded'],
  ['r5', 'succeeded'],
  ['r6', 'failed'],
  ['r7', 'failed'],
];
const COUNTS = { succeeded: 5, failed: 2, unknown: 0, cancelled: 0, not_run: 0 };

/** POSTs of a creation per idempotency key. */
function postsByKey(): Map<string, number> {
  const posts = new Map<string, number>();
  for (const c of proxy.calls) {
    if (c.method === 'POST' && c.key) posts.set(c.key, (posts.get(c.key) ?? 0) + 1);
  }
  return posts;
}

const sha256 = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');

/** Writes the results and checks that results.csv holds every row in its state. */
async function expectResults(args: string[], env: Record<string, string>, out: string): Promise<void> {
  const written = await cliJson<{ resultsCsv: string; rows: number }>([...args, '--json'], { env });
  expect(written).toMatchObject({ resultsCsv: path.join(out, 'results.csv'), rows: 7 });
  const csv = await readCsv(path.join(out, 'results.csv'));
  expect(csv.map((r) => [r.row_id, r.state])).toEqual(STATES);
  expect((csv.find((r) => r.row_id === 'r1')?.images ?? '').split(' ')).toHaveLength(2);
  const errors = await readCsv(path.join(out, 'errors.csv'));
  expect(errors.map((r) => [r.id, r.advice])).toEqual([
    ['r6', 'submit_again'],
    ['r7', 'revise_prompt'],
  ]);
}

describe('a batch run again after its row workflows are gone', { timeout: 120_000 }, () => {
  it('pays nothing for rows the store holds, and results still writes every row', async () => {
    const file = path.join(dir, 'prompts.csv');
    const out = path.join(dir, 'out');
    await writeFile(file, `${ROWS.join('\n')}\n`);
    const run = ['run', file, '--batch-id', BATCH, '--model', 'flux-dev', '--out', out];
    run.push('--max-attempts', '2', '--concurrency', '8', '--follow', '--json', '--allow-partial'); // rows fail

    // The first run, to its end.
    let env = await startTemporalAndWorker();
    const first = await cli(run, { env, timeoutMs: 60_000 });
    expect(first.code, `${describeRun(run, first)}\nworker:\n${worker?.output().slice(-4000)}`).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ status: 'completed', counts: COUNTS });
    const chargedBefore = chargedKeys(sim, BATCH).sort();
    const postsBefore = postsByKey();
    // Every row was sent; the flaky row twice (two refunded failures), the others once, the canary's key (r1) twice:
    // its submission and its check, a replay that charged nothing.
    expect([...postsBefore.keys()].map((k) => k.split('/')[2]).sort()).toEqual(
      ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r6', 'r7'].sort(),
    );
    expect([...postsBefore].filter(([, n]) => n !== 1)).toEqual([[`ib/${BATCH}/r1/a1`, 2]]);
    // Paid (and kept): r1-r5; charged and refunded: r6 twice, r7.
    expect(chargedBefore).toHaveLength(8);

    // r1's images are deleted from the output folder.
    const ledger = await defaultLedger();
    const r1 = (await ledger.row(BATCH, 'r1'))!.keys[0]!;
    await ledger.close();
    const images = r1.ended?.images ?? [];
    expect(images).toHaveLength(2);
    for (const image of images) await rm(path.join(out, image.path));

    // Temporal's retention passes: a new, empty dev server, and a new worker on it.
    await stopTemporalAndWorker();
    env = await startTemporalAndWorker();
    // Every key is forgotten by the service by now: one sent again would be charged again.
    await keysForgotten(sim);
    const gone = await cli(['status', BATCH], { env });
    expect(gone.code, describeRun(['status', BATCH], gone)).toBe(1);

    // results, from the store alone: every row in its state.
    await expectResults(['results', BATCH], env, out);

    // The same file, the same batch id, again.
    const callsBefore = proxy.calls.length;
    const filesBefore = sim.filesRequests().length;
    const second = await cli(run, { env, timeoutMs: 60_000 });
    expect(second.code, `${describeRun(run, second)}\nworker:\n${worker?.output().slice(-4000)}`).toBe(0);
    expect(JSON.parse(second.stdout) as BatchProgress).toMatchObject({ status: 'completed', counts: COUNTS });

    // Nothing charged again, nothing submitted again.
    expect(chargedKeys(sim, BATCH).sort()).toEqual(chargedBefore);
    expect(sim.charges.chargedTwice()).toEqual([]);
    expect(postsByKey()).toEqual(postsBefore);
    // r1's images are back, downloaded again from its creation (polled, not submitted).
    for (const image of images) {
      const bytes = await readFile(path.join(out, image.path));
      expect({ bytes: bytes.length, sha256: sha256(bytes) }).toEqual({ bytes: image.bytes, sha256: image.sha256 });
    }
    const newCalls = proxy.calls.slice(callsBefore);
    expect(newCalls.filter((c) => c.method !== 'GET')).toEqual([]);
    expect(newCalls.some((c) => c.path.endsWith(`/${r1.creationId}`))).toBe(true);
    expect(sim.filesRequests().length - filesBefore).toBeGreaterThanOrEqual(2);

    // The batch is known again: results, with and without --out.
    await expectResults(['results', BATCH], env, out);
    await expectResults(['results', BATCH, '--out', out], env, out);
  });
});
