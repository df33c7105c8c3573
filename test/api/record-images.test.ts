import { describe, expect, it } from 'vitest';
import { classifyResponse, RequestKind } from '../../src/api/classify';
import { DEFAULT_SUCCESS_STATUSES } from '../../src/api/contract';
import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../../src/api/money';
import {
  DEFAULT_MAX_INLINE_IMAGE_BYTES,
  DISCOVERED_SOURCE_SUFFIX,
  discoverImages,
  DiscoveryLimit,
  imagesOf,
  MAX_IMAGE_URL_LENGTH,
  MAX_LISTED_IMAGES,
  maxInlineBase64Length,
  parseCreation,
  parseModels,
  type CreationRecord,
} from '../../src/api/schemas';
import { defaultServiceConfig } from '../../src/config/service-config';
import { renderImage } from '../../src/simulator/png';
import { poll } from './helpers/poll';

/**
 * Reading a creation record through the settings (IMAGEGEN_ID_FIELDS, _STATUS_FIELDS, _ERROR_FIELDS, _IMAGE_FIELDS,
 * _MODEL_ID_FIELDS), and finding images where the settings do not say (discovery).
 */

const PNG = renderImage('p', 1, 0, 4, 4);
const PNG_B64 = PNG.toString('base64');
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0, 1]);

const record = (fields: Record<string, unknown>): CreationRecord => ({ status: 'succeeded', fields });
const urls = (images: { url: string }[]) => images.map((i) => i.url);

describe('the creation record through the settings', () => {
  it('reads id, status and error at the configured paths, in order, at the root or in a wrapper', () => {
    const fields = { idFields: ['job.uuid', 'id'], statusFields: ['state', 'status'], errorFields: ['failure.reason'] };
    expect(
      parseCreation({ job: { uuid: 'j1' }, state: 'failed', failure: { reason: 'boom' }, id: 'x' }, fields),
    ).toMatchObject({ id: 'j1', status: 'failed', error: 'boom' });
    expect(parseCreation({ data: { id: 7, status: 'queued' } }, fields)).toMatchObject({ id: '7', status: 'queued' });
    expect(parseCreation({ creation: { state: 'running' } }, fields)).toMatchObject({ status: 'running' });
    // A value of the wrong type at the first path gives way to the next path.
    expect(parseCreation({ state: 5, status: 'done', id: 'c' }, fields)).toMatchObject({ status: 'done' });
    // Nothing at the configured paths: no record (the classifier says so).
    expect(parseCreation({ uuid: 'c', phase: 'done' }, fields)).toBeUndefined();
  });

  it('classify reads through them: the submit id, the poll status and error', () => {
    const submitted = classifyResponse({
      kind: RequestKind.Submit,
      status: 202,
      headers: {},
      body: JSON.stringify({ job: { uuid: 'j-9' }, state: 'queued' }),
      nowMs: 0,
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      idFields: ['job.uuid'],
      statusFields: ['state'],
      defaultRetryAfterMs: 1000,
    });
    expect(submitted).toMatchObject({ kind: 'accepted', creationId: 'j-9', status: 'queued' });
    expect(
      poll(
        { uuid: 'c', phase: 'FAILED', why: 'Generation timed out.' },
        { statusFields: ['phase'], errorFields: ['why'] },
      ),
    ).toEqual({
      kind: 'ended',
      result: { outcome: 'failed', status: 'FAILED', error: 'Generation timed out.', retryable: true },
    });
  });

  it('a record with no id or status at the configured paths is reported by its top-level keys, never its values', () => {
    const secretish = 'https://cdn.example/signed?sig=SECRET-SIGNATURE';
    const out = poll({ state: 'succeeded', link: secretish, prompt: 'my private prompt' });
    expect(out.kind).toBe('malformed');
    const message = (out as { lastError: string }).lastError;
    expect(message).toContain('state, link, prompt');
    expect(message).not.toContain('SECRET');
    expect(message).not.toContain('private');
    const submitted = classifyResponse({
      kind: RequestKind.Submit,
      status: 202,
      headers: {},
      body: JSON.stringify({ uuid: 'c-secret-id', when: 'now' }),
      nowMs: 0,
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      defaultRetryAfterMs: 1000,
    });
    expect(submitted.kind).toBe('ambiguous');
    expect((submitted as { lastError: string }).lastError).toContain('uuid, when');
    expect((submitted as { lastError: string }).lastError).not.toContain('c-secret-id');
  });

  it('model ids are read at IMAGEGEN_MODEL_ID_FIELDS', () => {
    const body = { models: [{ slug: 'a', name: 'A' }, { model_id: 2 }, { id: 'ignored' }] };
    expect(parseModels(body, DEFAULT_PRICE_FIELDS, ['slug', 'model_id'])).toEqual([
      { id: 'a', name: 'A' },
      { id: '2' },
    ]);
    expect(parseModels(body, DEFAULT_PRICE_FIELDS)).toEqual([{ id: 'ignored' }]);
    const out = classifyResponse({
      kind: RequestKind.Models,
      status: 200,
      headers: {},
      body: JSON.stringify(body),
      nowMs: 0,
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      modelIdFields: ['slug'],
      defaultRetryAfterMs: 1000,
    });
    expect(out).toEqual({ kind: 'models', models: [{ id: 'a', name: 'A' }] });
  });
});

describe('images at the configured paths', () => {
  it.each([
    [
      'contract-defaults.md: images[].url, with width and height',
      { images: [{ url: 'https://f/0.png', width: 8, height: 4 }, { nope: 1 }, { url: 'https://f/2.png' }] },
      [
        { url: 'https://f/0.png', width: 8, height: 4, source: 'images[0].url' },
        { url: 'https://f/2.png', source: 'images[2].url' },
      ],
    ],
    ['a list of URLs: images[]', { images: ['https://f/a.png'] }, [{ url: 'https://f/a.png', source: 'images[0]' }]],
    [
      "OpenAI's data[].url",
      { data: [{ url: 'https://f/o.png', revised_prompt: 'x' }] },
      [{ url: 'https://f/o.png', source: 'data[0].url' }],
    ],
    [
      "OpenAI's data[].b64_json",
      { data: [{ b64_json: PNG_B64 }] },
      [{ url: `data:image/png;base64,${PNG_B64}`, source: 'data[0].b64_json' }],
    ],
    [
      "Replicate's output[]",
      { output: ['https://r/1.webp', 'https://r/2.webp'] },
      [
        { url: 'https://r/1.webp', source: 'output[0]' },
        { url: 'https://r/2.webp', source: 'output[1]' },
      ],
    ],
    ['a single output', { output: 'https://r/1.png' }, [{ url: 'https://r/1.png', source: 'output' }]],
    [
      'a data: URI, normalised (type lower case, parameters dropped)',
      { images: [{ url: `data:Image/PNG;name=a.png;base64,${PNG_B64}` }] },
      [{ url: `data:image/png;base64,${PNG_B64}`, source: 'images[0].url' }],
    ],
    [
      'base64 with white space and the URL-safe alphabet',
      { data: [{ b64_json: `${PNG_B64.slice(0, 20)}\n${PNG_B64.slice(20)}`.replace(/\+/g, '-').replace(/\//g, '_') }] },
      [{ url: `data:image/png;base64,${PNG_B64}`, source: 'data[0].b64_json' }],
    ],
  ])('%s', (_, fields, expected) => {
    expect(imagesOf(record(fields))).toEqual(expected);
  });

  it('the first path that finds an image wins; later ones are not merged in', () => {
    const fields = { images: [{ url: 'https://f/a.png' }], output: ['https://f/b.png'] };
    expect(urls(imagesOf(record(fields)))).toEqual(['https://f/a.png']);
    expect(urls(imagesOf(record(fields), { imageFields: ['output[]', 'images[].url'] }))).toEqual(['https://f/b.png']);
  });

  it('a configured path takes an object with url/href or b64_json, and its size', () => {
    const fields = { artifacts: [{ href: 'https://f/x.png', width: 2, height: 3 }, { base64: PNG_B64 }] };
    expect(imagesOf(record(fields), { imageFields: ['artifacts[]'] })).toEqual([
      { url: 'https://f/x.png', width: 2, height: 3, source: 'artifacts[0].href' },
      { url: `data:image/png;base64,${PNG_B64}`, source: 'artifacts[1].base64' },
    ]);
  });

  it('a string that is no image and no URL is not taken; one that is not http(s) is kept for the download to refuse', () => {
    const fields = { images: ['processing', '', '/relative/a.png', 'ftp://f/a.png'] };
    expect(urls(imagesOf(record(fields), { imageFields: ['images[]'] }))).toEqual(['/relative/a.png', 'ftp://f/a.png']);
  });

  it('classify passes IMAGEGEN_IMAGE_FIELDS and the download limit through', () => {
    const body = { id: 'c', status: 'succeeded', assets: { pics: [{ link: 'https://f/1.png' }] } };
    const out = poll(body, { imageFields: ['assets.pics[].link'] });
    expect(out).toMatchObject({
      kind: 'ended',
      result: { outcome: 'succeeded', images: [{ url: 'https://f/1.png', source: 'assets.pics[0].link' }] },
    });
  });
});

describe('discovery: images where the configured paths say nothing', () => {
  it.each([
    [
      'nested result.files[].href',
      { result: { files: [{ href: 'https://f/0.png', width: 4, height: 4 }, { href: 'https://f/1.png' }] } },
      [
        { url: 'https://f/0.png', width: 4, height: 4, source: 'result.files[0].href' },
        { url: 'https://f/1.png', source: 'result.files[1].href' },
      ],
    ],
    [
      'a list held by a field named like files',
      { outputs: { files: ['https://f/a.jpg'] } },
      [{ url: 'https://f/a.jpg', source: 'outputs.files[0]' }],
    ],
    [
      'a data: URI under any name',
      { payload: { picture: `data:image/png;base64,${PNG_B64}` } },
      [{ url: `data:image/png;base64,${PNG_B64}`, source: 'payload.picture' }],
    ],
    [
      'base64 bytes of a JPEG under image_base64',
      { artifacts: [{ image_base64: JPEG.toString('base64') }] },
      [{ url: `data:image/jpeg;base64,${JPEG.toString('base64')}`, source: 'artifacts[0].image_base64' }],
    ],
    [
      'base64 under b64 that is no image is not taken',
      { artifacts: [{ b64: Buffer.from('just some text, not an image').toString('base64') }] },
      [],
    ],
    [
      'an http URL under any name is a candidate (the download keeps it only when its bytes are an image)',
      { links: { self: 'https://api/creations/c' }, webhook_url: 'https://hook' },
      [
        { url: 'https://api/creations/c', source: 'links.self' },
        { url: 'https://hook', source: 'webhook_url' },
      ],
    ],
    [
      'what the record echoes of the request is not searched',
      { input: { image_url: 'https://mine/input.png' }, result: { url: 'https://f/out.png' } },
      [{ url: 'https://f/out.png', source: 'result.url' }],
    ],
  ])('%s', (_, fields, expected) => {
    const found = imagesOf(record({ id: 'c', status: 'succeeded', ...fields }));
    // An http(s) URL found by discovery is a candidate; an inline image is judged by its bytes already.
    const candidate = (url: string) => (url.startsWith('data:') ? {} : { candidate: true });
    expect(found).toEqual(
      expected.map((e) => ({ ...e, source: `${e.source}${DISCOVERED_SOURCE_SUFFIX}`, ...candidate(e.url) })),
    );
  });

  it('runs only when the configured paths find nothing', () => {
    const fields = { images: [{ url: 'https://f/a.png' }], result: { url: 'https://f/b.png' } };
    expect(imagesOf(record(fields))).toEqual([{ url: 'https://f/a.png', source: 'images[0].url' }]);
  });

  it('a success without any image gives none, and the record is named by its keys only', () => {
    const out = poll({ id: 'c', status: 'succeeded', note: 'a note, no link at all', message: 'done!' });
    expect(out).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded', images: [] } });
    const text = JSON.stringify(out);
    expect(text).not.toContain('no link at all');
    expect(text).not.toContain('done!');
  });

  it('is bounded in depth', () => {
    let deep: Record<string, unknown> = { url: 'https://f/deep.png' };
    for (let i = 0; i < DiscoveryLimit.depth + 2; i++) deep = { x: deep };
    expect(discoverImages(deep)).toEqual([]);
    let shallow: Record<string, unknown> = { url: 'https://f/ok.png' };
    for (let i = 0; i < DiscoveryLimit.depth - 2; i++) shallow = { x: shallow };
    expect(urls(discoverImages(shallow))).toEqual(['https://f/ok.png']);
  });

  it('is bounded in the values it looks at, and the images it keeps', () => {
    const late = { filler: Array.from({ length: DiscoveryLimit.values + 10 }, () => 0), url: 'https://f/late.png' };
    expect(discoverImages(late)).toEqual([]);
    const many = { files: Array.from({ length: 100 }, (_, i) => `https://f/${i}.png`) };
    expect(discoverImages(many)).toHaveLength(MAX_LISTED_IMAGES);
  });

  it('survives hostile records: deep nesting, __proto__ keys, odd key names', () => {
    const deep = JSON.parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`) as unknown;
    expect(discoverImages({ a: deep })).toEqual([]);
    const proto = JSON.parse('{"__proto__":{"url":"https://f/p.png"}}') as unknown;
    expect(discoverImages(proto)).toEqual([
      { url: 'https://f/p.png', source: `__proto__.url${DISCOVERED_SOURCE_SUFFIX}`, candidate: true },
    ]);
    const odd = { ['a key with spaces and "quotes"'.repeat(3)]: { url: 'https://f/o.png' } };
    const [found] = discoverImages(odd);
    expect(found?.source?.length).toBeLessThan(80);
  });
});

describe('bounds', () => {
  it('an http URL is cut to MAX_IMAGE_URL_LENGTH + 1, found by a path or by discovery', () => {
    const long = `https://f/${'a'.repeat(5000)}`;
    for (const fields of [{ images: [{ url: long }] }, { result: { href: long } }]) {
      const [image] = imagesOf(record(fields));
      expect(image?.url).toHaveLength(MAX_IMAGE_URL_LENGTH + 1);
    }
  });

  it('at most MAX_LISTED_IMAGES images are kept from the configured paths', () => {
    const fields = { images: Array.from({ length: 1000 }, (_, i) => ({ url: `https://f/${i}` })) };
    expect(imagesOf(record(fields))).toHaveLength(MAX_LISTED_IMAGES);
  });

  it('a data: URI is bounded by the download limit, not by the URL length limit', () => {
    const big = Buffer.concat([PNG, Buffer.alloc(6000, 7)]);
    const b64 = big.toString('base64');
    expect(b64.length).toBeGreaterThan(MAX_IMAGE_URL_LENGTH);
    // Within IMAGEGEN_MAX_DOWNLOAD_BYTES: kept whole, far past the URL length limit.
    const [whole] = imagesOf(record({ images: [{ url: `data:image/png;base64,${b64}` }] }), {
      maxInlineBytes: big.length,
    });
    expect(whole?.url).toBe(`data:image/png;base64,${b64}`);
    // Past it: cut to 4 base64 characters more than the limit's encoding, which decode to more than the limit.
    for (const fields of [{ images: [{ url: `data:image/png;base64,${b64}` }] }, { data: [{ b64_json: b64 }] }]) {
      const [cut] = imagesOf(record(fields), { maxInlineBytes: 1000 });
      const payload = cut!.url.slice('data:image/png;base64,'.length);
      expect(payload).toHaveLength(maxInlineBase64Length(1000) + 4);
      expect(Buffer.from(payload, 'base64').length).toBeGreaterThan(1000);
    }
    // Discovery is bounded the same way.
    const [found] = discoverImages({ result: { image_base64: b64 } }, 1000);
    expect(found?.url.length).toBe('data:image/png;base64,'.length + maxInlineBase64Length(1000) + 4);
  });

  it('maxInlineBase64Length is the base64 length of that many bytes', () => {
    for (const n of [1, 2, 3, 4, 1000, 1001]) {
      expect(maxInlineBase64Length(n)).toBe(Buffer.alloc(n).toString('base64').length);
    }
  });

  it('the client passes IMAGEGEN_MAX_DOWNLOAD_BYTES; the fallback is its default', () => {
    expect(DEFAULT_MAX_INLINE_IMAGE_BYTES).toBe(defaultServiceConfig().maxDownloadBytes);
    const b64 = Buffer.concat([PNG, Buffer.alloc(3000)]).toString('base64');
    const out = poll({ id: 'c', status: 'succeeded', data: [{ b64_json: b64 }] }, { maxDownloadBytes: 300 });
    if (out.kind !== 'ended' || out.result.outcome !== 'succeeded') throw new Error(out.kind);
    expect(out.result.images[0]?.url).toHaveLength('data:image/png;base64,'.length + maxInlineBase64Length(300) + 4);
  });
});
