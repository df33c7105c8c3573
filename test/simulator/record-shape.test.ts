import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyResponse, RequestKind, type Outcome } from '../../src/api/classify';
import { DEFAULT_SUCCESS_STATUSES, FailureMessage } from '../../src/api/contract';
import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../../src/api/money';
import { DISCOVERED_SOURCE_SUFFIX } from '../../src/api/schemas';
import { loadSimulatorConfigFile } from '../../src/cli/commands/simulator';
import { FaultKind, ManualClock, resolveConfig, SimulatorConfigError, type Simulator } from '../../src/simulator';
import { renderImage } from '../../src/simulator/png';
import { call, expectChargesConsistent, PROMPT, startTestSim, submit } from './helpers';

/**
 * The `records` switches: where a creation record shows its images (`imageShape`) and its status (`statusField`).
 * Only the HTTP bodies change; what is stored (and replayed) is contract-defaults.md's record, shown as the setting
 * says.
 */

const running: Simulator[] = [];
afterEach(async () => {
  for (const sim of running.splice(0)) {
    expectChargesConsistent(sim);
    await sim.close();
  }
});

type Records = {
  imageShape?: 'default' | 'nested' | 'inline-base64' | 'data-uri' | 'none';
  statusField?: string;
};

async function start(records: Records) {
  const { sim, clock } = await startTestSim({ records }, new ManualClock());
  running.push(sim);
  return { sim, clock };
}

/** A creation of two 512x256 images, submitted, then polled once it has succeeded. */
async function succeeded(records: Records) {
  const { sim, clock } = await start(records);
  const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev', num_images: 2, width: 512, height: 256 });
  expect(accepted.status).toBe(202);
  clock.advance(10_000);
  const done = await call(sim, 'GET', `/creations/${accepted.body.id}`);
  expect(done.status).toBe(200);
  return { sim, accepted, done, body: done.body as unknown as Record<string, unknown> };
}

/** The PNG the files port serves for image `n` of that creation (prompt, seed, 512x256 scaled down 16 times). */
const pngOf = (seed: number, n: number) => renderImage(PROMPT, seed, n, 32, 16);

/** What the client makes of a poll answer, with the default settings unless `statusFields` is given. */
function classifyPoll(text: string, statusFields?: string[]): Outcome {
  return classifyResponse({
    kind: RequestKind.Poll,
    status: 200,
    headers: {},
    body: text,
    nowMs: 0,
    successStatuses: DEFAULT_SUCCESS_STATUSES,
    costFields: DEFAULT_COST_FIELDS,
    priceFields: DEFAULT_PRICE_FIELDS,
    ...(statusFields ? { statusFields } : {}),
    defaultRetryAfterMs: 1000,
  });
}

describe('records.imageShape: where the images are', () => {
  it('default: images[].url, as contract-defaults.md says (and the record is exactly as before)', async () => {
    const { sim, body } = await succeeded({});
    const images = body.images as { url: string; width: number; height: number }[];
    expect(images).toEqual(
      [0, 1].map((n) => ({ url: `${sim.filesUrl}/files/${String(body.id)}-${n}.png`, width: 512, height: 256 })),
    );
    expect(Object.keys(body)).not.toContain('result');
  });

  it('nested: result.files[].href, no images field; the URLs serve the images', async () => {
    const { sim, body } = await succeeded({ imageShape: 'nested' });
    expect(body).not.toHaveProperty('images');
    const files = (body.result as { files: { href: string; width: number; height: number }[] }).files;
    expect(files.map((f) => f.href)).toEqual([0, 1].map((n) => `${sim.filesUrl}/files/${String(body.id)}-${n}.png`));
    expect(files[0]).toMatchObject({ width: 512, height: 256 });
    const got = await request(files[1]!.href);
    expect(Buffer.from(await got.body.arrayBuffer())).toEqual(pngOf(Number(body.seed), 1));
  });

  it('inline-base64: data[].b64_json holds the PNG bytes themselves', async () => {
    const { body } = await succeeded({ imageShape: 'inline-base64' });
    expect(body).not.toHaveProperty('images');
    const data = body.data as { b64_json: string }[];
    expect(data).toHaveLength(2);
    expect(data.map((d) => Buffer.from(d.b64_json, 'base64'))).toEqual([0, 1].map((n) => pngOf(Number(body.seed), n)));
    expect(JSON.stringify(body)).not.toMatch(/https?:\/\//);
  });

  it('data-uri: images[].url is a data:image/png;base64 URI of the PNG', async () => {
    const { body } = await succeeded({ imageShape: 'data-uri' });
    const images = body.images as { url: string }[];
    expect(images).toHaveLength(2);
    for (const [n, image] of images.entries()) {
      expect(image.url.startsWith('data:image/png;base64,')).toBe(true);
      expect(Buffer.from(image.url.slice('data:image/png;base64,'.length), 'base64')).toEqual(
        pngOf(Number(body.seed), n),
      );
    }
  });

  it('none: a success that shows no image at all', async () => {
    const { body } = await succeeded({ imageShape: 'none' });
    expect(body.status).toBe('succeeded');
    expect(body).not.toHaveProperty('images');
    expect(JSON.stringify(body)).not.toMatch(/https?:\/\/|base64|files/);
  });

  it.each(['nested', 'inline-base64', 'data-uri', 'none'] as const)(
    '%s: in flight and on the 202, the images are not there yet, in the same shape',
    async (imageShape) => {
      const { sim } = await start({ imageShape });
      const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'k1' });
      const replay = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'k1' });
      expect(replay.body).toEqual(accepted.body);
      const polled = await call(sim, 'GET', `/creations/${accepted.body.id}`);
      for (const body of [accepted.body, polled.body] as unknown as Record<string, unknown>[]) {
        if (imageShape === 'nested') expect(body.result).toEqual({ files: [] });
        if (imageShape === 'inline-base64') expect(body.data).toEqual([]);
        if (imageShape === 'data-uri') expect(body.images).toEqual([]);
        if (imageShape === 'none') expect(Object.keys(body)).not.toContain('images');
      }
    },
  );

  it('the client finds them all with its default settings: by its paths, or by discovery', async () => {
    const expected = {
      default: { url: /^http:\/\/.*-0\.png$/, source: 'images[0].url' },
      'data-uri': { url: /^data:image\/png;base64,/, source: 'images[0].url' },
      'inline-base64': { url: /^data:image\/png;base64,/, source: 'data[0].b64_json' },
      nested: { url: /^http:\/\/.*-0\.png$/, source: `result.files[0].href${DISCOVERED_SOURCE_SUFFIX}` },
    } as const;
    for (const [imageShape, want] of Object.entries(expected)) {
      const { sim, done } = await succeeded({ imageShape: imageShape as Records['imageShape'] });
      const out = classifyPoll(JSON.stringify(done.body));
      if (out.kind !== 'ended' || out.result.outcome !== 'succeeded') throw new Error(`${imageShape}: ${out.kind}`);
      expect(out.result.images, imageShape).toHaveLength(2);
      expect(out.result.images[0]?.url, imageShape).toMatch(want.url);
      expect(out.result.images[0]?.source, imageShape).toBe(want.source);
      if (imageShape === 'inline-base64') {
        const url = out.result.images[1]!.url;
        const seed = (done.body as unknown as { seed: number }).seed;
        expect(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64')).toEqual(pngOf(seed, 1));
      }
      await sim.close();
      running.splice(running.indexOf(sim), 1);
    }
    const { done } = await succeeded({ imageShape: 'none' });
    const none = classifyPoll(JSON.stringify(done.body));
    expect(none).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded', images: [] } });
  });
});

describe('records.statusField: where the status is', () => {
  it('state: the 202, the GETs and a failure carry `state`, never `status`', async () => {
    const { sim, clock } = await start({ statusField: 'state' });
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toMatchObject({ state: 'queued' });
    expect(accepted.body).not.toHaveProperty('status');
    clock.advance(10_000);
    const done = await call(sim, 'GET', `/creations/${accepted.body.id}`);
    expect(done.body).toMatchObject({ state: 'succeeded' });
    expect(done.body).not.toHaveProperty('status');
    // Without the setting, the client sees no status; with IMAGEGEN_STATUS_FIELDS=state, a success.
    expect(classifyPoll(JSON.stringify(done.body))).toMatchObject({ kind: 'malformed' });
    expect(classifyPoll(JSON.stringify(done.body), ['state'])).toMatchObject({
      kind: 'ended',
      result: { outcome: 'succeeded', status: 'succeeded' },
    });

    sim.scriptFor('[bad]', [FaultKind.FailSafety]);
    const bad = await submit(sim, { prompt: `${PROMPT} [bad]`, model: 'flux-dev' });
    clock.advance(10_000);
    const failed = await call(sim, 'GET', `/creations/${bad.body.id}`);
    expect(failed.body).toMatchObject({ state: 'failed', error: FailureMessage.SafetyFilter });
    expect(failed.body).not.toHaveProperty('status');
    expect(classifyPoll(JSON.stringify(failed.body), ['state'])).toMatchObject({
      kind: 'ended',
      result: { outcome: 'failed', error: FailureMessage.SafetyFilter, retryable: false },
    });
  });

  it('is kept in its place among the fields; `status` is the default', async () => {
    const { sim } = await start({ statusField: 'job_state' });
    const accepted = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expect(Object.keys(accepted.body).slice(0, 2)).toEqual(['id', 'job_state']);
    expect(resolveConfig({}).records).toEqual({ imageShape: 'default', statusField: 'status', envelope: 'none' });
  });
});

describe('records: configuration', () => {
  it.each([
    [{ imageShape: 'svg' }, 'records.imageShape'],
    [{ statusField: '' }, 'records.statusField'],
    [{ statusField: 'id' }, 'records.statusField'],
    [{ extra: 1 }, 'records'],
  ])('refuses %j, naming the field', (records, field) => {
    let err: unknown;
    try {
      resolveConfig({ records } as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SimulatorConfigError);
    expect((err as SimulatorConfigError).issues.join('\n')).toContain(field);
  });

  it('is read from the simulator config file (imagebatch simulator --config)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sim-records-'));
    try {
      const file = path.join(dir, 'sim.json');
      await writeFile(file, JSON.stringify({ records: { imageShape: 'nested', statusField: 'state' } }));
      const input = await loadSimulatorConfigFile(file);
      expect(resolveConfig(input).records).toEqual({ imageShape: 'nested', statusField: 'state', envelope: 'none' });
      await writeFile(file, JSON.stringify({ records: { imageShape: 'gif' } }));
      await expect(loadSimulatorConfigFile(file)).rejects.toThrow(/records\.imageShape/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
