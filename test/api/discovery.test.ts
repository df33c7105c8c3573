import { describe, expect, it } from 'vitest';
import { DISCOVERED_SOURCE_SUFFIX, imagesOf, parseCreation } from '../../src/api/schemas';
import { renderImage } from '../../src/simulator/png';
import { poll } from './helpers/poll';

/**
 * Discovery by principle: when the configured image paths find nothing in a succeeded record, every http(s) URL in it
 * (outside what echoes the request) is a candidate, whatever its field is named, and an inline image is taken when
 * its bytes are an image's. The shapes are those of real queue-style services.
 */

const PNG_B64 = renderImage('p', 1, 0, 4, 4).toString('base64');
const found = (body: unknown, reading: Parameters<typeof imagesOf>[1] = {}) => imagesOf(parseCreation(body)!, reading);
const discovered = (source: string) => `${source}${DISCOVERED_SOURCE_SUFFIX}`;

describe('discovery: the shapes of real queue APIs', () => {
  it('a URL one level down under an unfamiliar name, the record wrapped in data: a candidate', () => {
    const body = {
      data: {
        id: 'j1',
        status: 'succeeded',
        cost: { amount: '0.04', currency: 'USD' },
        result: { artifact_location: 'https://cdn.example/a/j1', expires_in: 20 },
      },
    };
    expect(found(body)).toEqual([
      { url: 'https://cdn.example/a/j1', source: discovered('result.artifact_location'), candidate: true },
    ]);
  });

  it('assets.image and generated_images[].url: found, their URLs candidates with their sizes', () => {
    expect(found({ id: 'j', status: 'done', assets: { image: 'https://cdn/x.png' } })).toEqual([
      { url: 'https://cdn/x.png', source: discovered('assets.image'), candidate: true },
    ]);
    const generated = {
      generated_images: [{ url: 'https://cdn/0.webp', width: 8, height: 8 }, { url: 'https://cdn/1' }],
    };
    expect(found({ id: 'j', status: 'done', ...generated })).toEqual([
      {
        url: 'https://cdn/0.webp',
        width: 8,
        height: 8,
        source: discovered('generated_images[0].url'),
        candidate: true,
      },
      { url: 'https://cdn/1', source: discovered('generated_images[1].url'), candidate: true },
    ]);
  });

  it('a URL string as the whole output: at the configured path, or by discovery when the paths say otherwise', () => {
    const body = { id: 'p', status: 'succeeded', output: 'https://replicate.delivery/o.png' };
    expect(found(body)).toEqual([{ url: 'https://replicate.delivery/o.png', source: 'output' }]);
    expect(found(body, { imageFields: ['images[].url'] })).toEqual([
      { url: 'https://replicate.delivery/o.png', source: discovered('output'), candidate: true },
    ]);
  });

  it('every URL is a candidate, API links and webhooks included (the download drops what is no image)', () => {
    const body = {
      id: 'p',
      status: 'succeeded',
      urls: { get: 'https://api.replicate.com/v1/predictions/p', cancel: 'https://api.replicate.com/v1/p/cancel' },
      webhook: 'https://hooks.example/imagebatch',
      result: { location: 'https://cdn/p.png' },
      note: 'see https://example.com for details',
    };
    expect(found(body).map((i) => [i.url, i.candidate])).toEqual([
      ['https://api.replicate.com/v1/predictions/p', true],
      ['https://api.replicate.com/v1/p/cancel', true],
      ['https://hooks.example/imagebatch', true],
      ['https://cdn/p.png', true],
    ]);
  });

  it('an inline image under any name is taken by its bytes, whatever type its data: URI declares', () => {
    const body = {
      id: 'p',
      status: 'succeeded',
      output: {
        picture_bytes: PNG_B64,
        blob: `data:application/octet-stream;base64,${PNG_B64}`,
        text: 'aGVsbG8gd29ybGQ=',
      },
    };
    expect(found(body, { imageFields: ['none'] })).toEqual([
      { url: `data:image/png;base64,${PNG_B64}`, source: discovered('output.picture_bytes') },
      { url: `data:image/png;base64,${PNG_B64}`, source: discovered('output.blob') },
    ]);
  });

  it('what echoes the request is not searched', () => {
    const body = {
      id: 'p',
      status: 'succeeded',
      input: { image: 'https://mine/in.png' },
      params: { u: 'https://x/y' },
    };
    expect(found(body)).toEqual([]);
  });

  it('IMAGEGEN_IMAGE_DISCOVERY=off: only the configured paths, through classify too', () => {
    const body = { data: { id: 'j', status: 'succeeded', result: { artifact_location: 'https://cdn/a' } } };
    expect(found(body, { discovery: false })).toEqual([]);
    expect(poll(body, { imageDiscovery: false })).toMatchObject({
      kind: 'ended',
      result: { outcome: 'succeeded', images: [] },
    });
    expect(poll(body)).toMatchObject({
      kind: 'ended',
      result: { outcome: 'succeeded', images: [{ url: 'https://cdn/a', candidate: true }] },
    });
  });

  it('the cost as { amount: "0.04", currency: "USD" } in a record wrapped in data', () => {
    const body = { data: { id: 'j', status: 'succeeded', cost: { amount: '0.04', currency: 'USD' } } };
    expect(poll(body)).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded', costUsd: 0.04 } });
    const euro = { data: { id: 'j', status: 'succeeded', cost: { amount: '0.04', currency: 'EUR' } } };
    const out = poll(euro);
    expect(out.kind === 'ended' && out.result.costUsd).toBeUndefined();
  });
});
