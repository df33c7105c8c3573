import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput, type CreateImageResult } from '../../src/model';
import type { LedgerStore } from '../../src/ledger';
import { requestFingerprinter } from '../../src/activities/key-ledger';
import { defaultServiceConfig } from '../../src/config/service-config';
import type { ServiceConfig } from '../../src/api/service-config';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { tempLedger } from '../helpers/ledger';
import { activitiesFor, runActivity } from './helpers';

/**
 * createImage asks the ledger store by the request's fingerprint before it sends a key: an earlier request with the
 * same fingerprint, in another batch, serves the row instead (its images copied, or its creation fetched again),
 * nothing is sent and nothing charged; one still in flight is waited for; one of unknown outcome is reported.
 */
let stub: StubServer | undefined;
let root: string | undefined;
let ledger: LedgerStore | undefined;
afterEach(async () => {
  await stub?.close();
  await ledger?.close();
  if (root) await rm(root, { recursive: true, force: true });
  stub = undefined;
  ledger = undefined;
  root = undefined;
});

const PNG = Buffer.from('89504e470d0a1a0a706e672d6279746573', 'hex');
const request = { prompt: 'a lighthouse at dusk', model: 'flux-dev' };

function input(batchId: string, extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: `ib/${batchId}/r/a1`,
    request,
    batchId,
    rowId: 'r',
    outDir: `out-${batchId}`,
    maxPollWaitMs: 30 * 60_000,
    ...extra,
  };
}

/**
 * A service whose creations succeed with one image each (`cr_<n>`, one per POST), or fail at generation when
 * `failing`, or answer 500 to every POST when `silent`.
 */
async function setup(options: { silent?: boolean; failing?: boolean; config?: Partial<ServiceConfig> } = {}) {
  root = await mkdtemp(path.join(tmpdir(), 'imagebatch-reuse-'));
  ledger = await tempLedger();
  let creations = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST') {
      if (options.silent) return { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'try again' } } };
      return { status: 202, body: { id: `cr_${++creations}`, status: 'queued', cost_usd: 0.04 } };
    }
    if (req.url.includes('/img/')) return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
    const id = req.url.split('/').pop()!;
    if (options.failing) return { status: 200, body: { id, status: 'failed', error: 'provider_timeout' } };
    return {
      status: 200,
      body: { id, status: 'succeeded', cost_usd: 0.04, images: [{ url: `${stub!.url}/img/${id}.png` }] },
    };
  });
  const made = activitiesFor(
    stub.url,
    { minPollIntervalMs: 1_000, maxAmbiguousTries: 2, ...options.config },
    { outputRoot: root, ledger },
  );
  const posts = () => stub!.requests.filter((r) => r.method === 'POST').length;
  const gets = () => stub!.requests.filter((r) => r.method === 'GET').length;
  /** Attempts as Temporal would make them: each after the previous one's delay, with its last heartbeat details. */
  const drive = async (run: () => Promise<CreateImageResult>) => {
    let details: unknown;
    for (let n = 0; n < 60; n++) {
      const r = await runActivity(run, details === undefined ? {} : { heartbeatDetails: details });
      details = r.heartbeats.at(-1) ?? details;
      if (r.value) return { value: r.value, waits: n };
      const f = r.failure!;
      if (f.nonRetryable) return { failure: f, waits: n };
      made.clock.t += typeof f.nextRetryDelay === 'number' ? f.nextRetryDelay : 1_000;
    }
    throw new Error('createImage never ended');
  };
  return { ...made, posts, gets, drive, root, ledger };
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('createImage: a request paid before serves the row', () => {
  it('copies the images of the earlier key into this batch, checked, and sends nothing', async () => {
    const t = await setup();
    const first = await t.drive(() => t.activities.createImage(input('first')));
    expect(first.value?.outcome).toBe('succeeded');
    expect(t.posts()).toBe(1);
    const requestsBefore = stub!.requests.length;

    const second = await t.drive(() => t.activities.createImage(input('second')));
    expect(second.value).toMatchObject({
      outcome: 'reused',
      reusedFrom: { batchId: 'first', rowId: 'r', idempotencyKey: 'ib/first/r/a1', creationId: 'cr_1' },
    });
    expect(stub!.requests.length).toBe(requestsBefore); // not a single request
    const image = second.value!.outcome === 'reused' ? second.value!.images[0]! : undefined;
    const bytes = await readFile(path.join(t.root, 'out-second', image!.path));
    expect(sha256(bytes)).toBe(sha256(PNG));
    expect((await t.ledger.row('second', 'r'))?.reusedFrom).toBe('ib/first/r/a1');
    // Its own key was never sent: the store holds no key of it.
    expect(await t.ledger.key('ib/second/r/a1')).toBeUndefined();
  });

  it('fetches the earlier creation again by its id (a GET, never a POST) when its images are gone', async () => {
    const t = await setup();
    await t.drive(() => t.activities.createImage(input('first')));
    await rm(path.join(t.root, 'out-first'), { recursive: true, force: true });
    const second = await t.drive(() => t.activities.createImage(input('second')));
    expect(second.value).toMatchObject({ outcome: 'reused', reusedFrom: { creationId: 'cr_1' } });
    expect(second.value?.outcome === 'reused' && second.value.images).toHaveLength(1);
    expect(t.posts()).toBe(1);
  });

  it('waits for an earlier request still being sent elsewhere, then is served by it', async () => {
    const t = await setup();
    // The first batch's key is written ahead, and its request not answered yet (in flight, or its worker died).
    await t.ledger.decide({
      ...input('first'),
      ...printOfRequest(),
      outDir: path.join(t.root, 'out-first'),
      reuse: true,
    });
    const waiting = await runActivity(() => t.activities.createImage(input('second')));
    expect(waiting.failure?.type).toBe(FailureType.Pending);
    expect(waiting.failure?.message).toContain('waiting for batch first');
    expect(t.posts()).toBe(0);
    // Accepted there: that row polls its creation, so this one still waits (two pollers would pass the interval).
    await t.ledger.append([{ type: 'accepted', ...keyOf('first'), creationId: 'cr_9' }]);
    const still = await runActivity(() => t.activities.createImage(input('second')));
    expect(still.failure?.type).toBe(FailureType.Pending);
    expect(t.gets()).toBe(0);
    // It ends, its images not saved where this host can read them: its creation is fetched again by its id.
    await t.ledger.append([{ type: 'ended', ...keyOf('first'), outcome: 'succeeded', creationId: 'cr_9' }]);
    const served = await t.drive(() => t.activities.createImage(input('second')));
    expect(served.value).toMatchObject({ outcome: 'reused', reusedFrom: { creationId: 'cr_9' } });
    expect(t.posts()).toBe(0);
  });

  it('an earlier request in flight past the maximum wait: its creation is followed here, by its id', async () => {
    const t = await setup();
    await t.ledger.decide({
      ...input('first'),
      ...printOfRequest(),
      outDir: path.join(t.root, 'out-first'),
      reuse: true,
    });
    await t.ledger.append([{ type: 'accepted', ...keyOf('first'), creationId: 'cr_7' }]);
    const served = await t.drive(() => t.activities.createImage(input('second', { maxPollWaitMs: 5_000 })));
    expect(served.value).toMatchObject({ outcome: 'reused', reusedFrom: { creationId: 'cr_7' } });
    expect(served.waits).toBeGreaterThanOrEqual(5); // waited about 5 s at the 1 s poll interval first
    expect(t.posts()).toBe(0);
  });

  it('an earlier request that never got an answer, past the maximum wait: reported, nothing sent', async () => {
    const t = await setup();
    await t.ledger.decide({
      ...input('first'),
      ...printOfRequest(),
      outDir: path.join(t.root, 'out-first'),
      reuse: true,
    });
    const reported = await t.drive(() => t.activities.createImage(input('second', { maxPollWaitMs: 3_000 })));
    expect(reported.value).toMatchObject({ outcome: 'reused', images: [], reusedFrom: { batchId: 'first' } });
    expect(reported.value?.outcome === 'reused' && reported.value.error).toContain(
      'did not end within the maximum wait',
    );
    expect(stub!.requests).toHaveLength(0);
  });

  it('reports an earlier request whose outcome is not known, naming the batch to reconcile; sends nothing', async () => {
    const t = await setup({ silent: true });
    const first = await t.drive(() => t.activities.createImage(input('first')));
    expect(first.failure?.type).toBe(FailureType.Unknown);
    const posts = t.posts();
    const second = await t.drive(() => t.activities.createImage(input('second')));
    expect(second.value).toMatchObject({ outcome: 'reused', images: [] });
    expect(second.value?.outcome === 'reused' && second.value.error).toContain('imagebatch reconcile first');
    expect(t.posts()).toBe(posts);
  });

  it('an earlier creation that failed (refunded) serves nobody: the row sends its own key', async () => {
    const t = await setup({ failing: true });
    const first = await t.drive(() => t.activities.createImage(input('first')));
    expect(first.value).toMatchObject({ outcome: 'failed', creationId: 'cr_1' });
    const second = await t.drive(() => t.activities.createImage(input('second')));
    expect(second.value).toMatchObject({ outcome: 'failed', creationId: 'cr_2' });
    expect(t.posts()).toBe(2);
  });

  it('with the key in a body field, the request is its content: another batch under another key reuses it', async () => {
    const t = await setup({ config: { idempotencyField: 'meta.key' } });
    await t.drive(() => t.activities.createImage(input('first')));
    const [sent] = stub!.requests;
    expect(JSON.parse(sent!.body)).toEqual({ ...request, meta: { key: 'ib/first/r/a1' } });
    expect(sent!.headers['idempotency-key']).toBeUndefined();
    const second = await t.drive(() => t.activities.createImage(input('second')));
    expect(second.value).toMatchObject({ outcome: 'reused', reusedFrom: { creationId: 'cr_1' } });
    expect(t.posts()).toBe(1);
  });

  it('a batch that asks for new images sends its own key', async () => {
    const t = await setup();
    await t.drive(() => t.activities.createImage(input('first')));
    const second = await t.drive(() => t.activities.createImage(input('second', { ledger: { newImages: true } })));
    expect(second.value).toMatchObject({ outcome: 'succeeded', creationId: 'cr_2' });
    expect(t.posts()).toBe(2);
  });

  it("a worker whose store is not the batch's sends nothing, and names the setting", async () => {
    const t = await setup();
    const r = await runActivity(() => t.activities.createImage(input('b', { ledger: { storeId: 'another-store' } })));
    expect(r.failure?.type).toBe(FailureType.Config);
    expect(r.failure?.message).toContain('IMAGEBATCH_LEDGER');
    expect(r.failure?.message).toContain(t.ledger.location);
    expect(stub!.requests).toHaveLength(0);
    expect(await t.ledger.key('ib/b/r/a1')).toBeUndefined();
  });
});

const keyOf = (batchId: string) => ({ batchId, rowId: 'r', idempotencyKey: `ib/${batchId}/r/a1` });

/** The print the worker makes of {@link request}. */
const printOfRequest = () => requestFingerprinter(defaultServiceConfig({ baseUrl: stub!.url }))(request);
