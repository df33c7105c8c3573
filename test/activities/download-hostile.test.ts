import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model';
import {
  AddressPolicy,
  addressClass,
  createGuardedDownloadDispatcher,
  parseAllowList,
  type AllowList,
  type LookupAll,
} from '../../src/api/download-guard';
import { sniffImageType } from '../../src/activities/download';
import { ConfigError, loadServiceConfig } from '../../src/config/service-config';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity, tempDir } from './helpers';

/** A hostile image service: its image URLs and redirects aim at the worker's own network. */

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
const JPEG = Buffer.from('ffd8ffe000104a46494600010100000100010000ffd9', 'hex');
/** A service that is not on loopback: the simulator's exception (its own host) does not apply. */
const REMOTE_BASE = 'https://api.images.example/api/public/v1';

let servers: StubServer[] = [];
let out: { dir: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  out = await tempDir();
});
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
  await out.cleanup();
});

async function files(reply: (url: string, i: number) => StubReply) {
  const server = await startStub((r, i) => reply(r.url, i));
  servers.push(server);
  return server;
}

function input(urls: string[], creationId = 'cr_1') {
  return { batchId: 'b1', rowId: 'row-1', creationId, images: urls.map((url) => ({ url })), outDir: 'o' };
}

/** A download dispatcher whose DNS is `names` (anything else: not found), allowing `allow`. */
function dispatcherWith(names: Record<string, string[]>, allow = '', baseUrl = REMOTE_BASE) {
  const lookup: LookupAll = (host) => {
    const got = names[host];
    if (!got) return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));
    return Promise.resolve(got.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
  const list = parseAllowList(allow) as AllowList;
  return createGuardedDownloadDispatcher({
    policy: new AddressPolicy({ allow: list, baseUrl, lookup }),
    connections: 4,
    connectTimeoutMs: 1000,
    headersTimeoutMs: 2000,
    bodyTimeoutMs: 2000,
  });
}

describe('downloads refuse loopback, private and link-local addresses', () => {
  it('refuses literal addresses of every such kind before connecting, naming the address and the setting', async () => {
    const server = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const port = new URL(server.origin).port;
    const { activities } = activitiesFor(REMOTE_BASE, { connectTimeoutMs: 500 }, { outputRoot: out.dir });
    const cases = [
      [`http://127.0.0.1:${port}/a.png`, 'loopback'],
      [`http://[::ffff:127.0.0.1]:${port}/a.png`, 'loopback'],
      [`http://[::1]:${port}/a.png`, 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'link-local'],
      ['http://10.0.0.1/a.png', 'private'],
      ['http://192.168.1.1/a.png', 'private'],
      ['http://0.0.0.0/a.png', 'unspecified'],
    ] as const;
    for (const [url, kind] of cases) {
      const r = await runActivity(() => activities.downloadImages(input([url])));
      expect(r.failure?.type, url).toBe(FailureType.DownloadFailed);
      expect(r.failure?.nonRetryable, url).toBe(true);
      expect(r.failure?.message, url).toMatch(new RegExp(`a ${kind} address.*IMAGEGEN_DOWNLOAD_ALLOW_HOSTS`));
    }
    expect(server.requests).toHaveLength(0);
  });

  it('refuses a redirect from an allowed host to a loopback address, at that hop', async () => {
    const target = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const redirector = await files(() => ({
      status: 302,
      headers: { location: `${target.origin}/real.png` },
      body: '',
    }));
    const dispatcher = dispatcherWith({ 'images.example': ['127.0.0.1'] }, 'images.example');
    const { activities } = activitiesFor(REMOTE_BASE, {}, { outputRoot: out.dir, downloadDispatcher: dispatcher });
    const url = `http://images.example:${new URL(redirector.origin).port}/moved`;
    const r = await runActivity(() => activities.downloadImages(input([url])));
    expect(redirector.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
    expect(r.failure?.nonRetryable).toBe(true);
    expect(r.failure?.message).toMatch(/redirected to http:\/\/127\.0\.0\.1:\d+\/real\.png: refused .*loopback/);
    await dispatcher.close();
  });

  it('refuses a host name that resolves to a private address, and one whose answers mix public and private', async () => {
    const dispatcher = dispatcherWith({
      'internal.example': ['192.168.7.7'],
      'mixed.example': ['93.184.216.34', '10.9.8.7'],
    });
    const { activities } = activitiesFor(REMOTE_BASE, {}, { outputRoot: out.dir, downloadDispatcher: dispatcher });
    const a = await runActivity(() => activities.downloadImages(input(['http://internal.example/a.png'])));
    expect(a.failure?.message).toMatch(/refused to download from internal\.example \(192\.168\.7\.7\): a private/);
    const b = await runActivity(() => activities.downloadImages(input(['http://mixed.example/a.png'])));
    expect(b.failure?.message).toMatch(/mixed\.example \(10\.9\.8\.7\)/);
    await dispatcher.close();
  });

  it('refuses localhost (the system resolver) when the service is not on loopback', async () => {
    const server = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const { activities } = activitiesFor(REMOTE_BASE, {}, { outputRoot: out.dir });
    const r = await runActivity(() =>
      activities.downloadImages(input([`http://localhost:${new URL(server.origin).port}/a.png`])),
    );
    expect(r.failure?.message).toMatch(/refused to download from localhost .*a loopback address/);
    expect(server.requests).toHaveLength(0);
  });

  it('downloads from an address on IMAGEGEN_DOWNLOAD_ALLOW_HOSTS, and from the service host when it is loopback', async () => {
    const server = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const config = loadServiceConfig({ IMAGEGEN_BASE_URL: REMOTE_BASE, IMAGEGEN_DOWNLOAD_ALLOW_HOSTS: '127.0.0.0/8' });
    const allowed = activitiesFor(
      REMOTE_BASE,
      { downloadAllowHosts: config.downloadAllowHosts },
      { outputRoot: out.dir },
    );
    const a = await runActivity(() => allowed.activities.downloadImages(input([`${server.origin}/a.png`])));
    expect(a.failure).toBeUndefined();
    // The simulator's case: the service on 127.0.0.1, its files on 127.0.0.1 too, no setting needed.
    const local = activitiesFor('http://127.0.0.1:9/api/public/v1', {}, { outputRoot: out.dir });
    const b = await runActivity(() => local.activities.downloadImages(input([`${server.origin}/b.png`], 'cr_2')));
    expect(b.failure).toBeUndefined();
    // ...but only that address: another loopback address or a private one stays refused.
    const c = await runActivity(() => local.activities.downloadImages(input(['http://127.0.0.2:9/c.png'], 'cr_3')));
    expect(c.failure?.message).toMatch(/127\.0\.0\.2: a loopback address/);
  });

  it('validates IMAGEGEN_DOWNLOAD_ALLOW_HOSTS at start, naming the variable', () => {
    for (const bad of ['10.0.0.0/33', 'bad host', '1.2.3.4/8/9', 'http://x.example']) {
      expect(() => loadServiceConfig({ IMAGEGEN_DOWNLOAD_ALLOW_HOSTS: bad }), bad).toThrow(ConfigError);
      expect(() => loadServiceConfig({ IMAGEGEN_DOWNLOAD_ALLOW_HOSTS: bad }), bad).toThrow(
        /^IMAGEGEN_DOWNLOAD_ALLOW_HOSTS: /,
      );
    }
    expect(
      loadServiceConfig({ IMAGEGEN_DOWNLOAD_ALLOW_HOSTS: ' files.corp.example, 10.0.0.0/8,fd00::/8 ' })
        .downloadAllowHosts,
    ).toEqual(['files.corp.example', '10.0.0.0/8', 'fd00::/8']);
    expect(loadServiceConfig({}).downloadAllowHosts).toEqual([]);
  });

  it('classifies addresses, IPv4-mapped and NAT64 forms by their IPv4 address', () => {
    expect(
      [
        '8.8.8.8',
        '127.1.2.3',
        '172.31.0.1',
        '172.32.0.1',
        '169.254.169.254',
        '224.0.0.1',
        '255.255.255.255',
        '::1',
        '::',
        'fd12::1',
        'fe80::1',
        'ff02::1',
        '::ffff:169.254.169.254',
        '::ffff:a9fe:a9fe',
        '64:ff9b::10.0.0.1',
        '2606:4700::1111',
      ].map(addressClass),
    ).toEqual([
      'public',
      'loopback',
      'private',
      'public',
      'link-local',
      'multicast',
      'reserved',
      'loopback',
      'unspecified',
      'private',
      'link-local',
      'multicast',
      'link-local',
      'link-local',
      'private',
      'public',
    ]);
  });

  // Issue #30 item 8, leak 3: IPv6 forms that carry an IPv4 address, or lead to a local network, passed as public.
  it.each([
    ['2002:7f00:1::', 'loopback', '6to4 of 127.0.0.1'],
    ['2002:7f00:0001:0:0:0:0:1', 'loopback', '6to4 of 127.0.0.1, a host inside'],
    ['2002:a9fe:a9fe::1', 'link-local', '6to4 of the metadata address'],
    ['2002:0a00:0001::', 'private', '6to4 of 10.0.0.1'],
    ['2002:c0a8:0101::', 'private', '6to4 of 192.168.1.1'],
    ['2002::', 'unspecified', '6to4 of 0.0.0.0'],
    ['2002:0808:0808::', 'public', '6to4 of 8.8.8.8: the IPv4 rule decides'],
    ['64:ff9b:1::', 'private', 'local-use NAT64 (RFC 8215)'],
    ['64:ff9b:1:ffff::808:808', 'private', 'local-use NAT64, whatever it embeds'],
    ['64:ff9b::7f00:1', 'loopback', 'well-known NAT64 of 127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'link-local', 'well-known NAT64 of the metadata address'],
    ['64:ff9b::808:808', 'public', 'well-known NAT64 of 8.8.8.8'],
    ['2001::', 'reserved', 'Teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved', 'Teredo, a client address'],
    ['::ffff:0:7f00:1', 'loopback', 'IPv4-translated (SIIT) 127.0.0.1'],
    ['2001:db8::1', 'reserved', 'documentation'],
    ['2001:4860:4860::8888', 'public', 'a public address near Teredo'],
    ['2003::1', 'public', 'a public address near 6to4'],
    ['64:ff9b:2::1', 'public', 'past the local-use NAT64 block'],
  ])('classifies %s as %s (%s)', (ip, expected) => {
    expect(addressClass(ip)).toBe(expected);
  });

  it('refuses a host name that resolves to a 6to4 or NAT64 form of a loopback or metadata address', async () => {
    for (const address of ['2002:7f00:1::', '64:ff9b:1::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2']) {
      const policy = new AddressPolicy({
        allow: parseAllowList('files.example') as AllowList,
        baseUrl: REMOTE_BASE,
        lookup: () => Promise.resolve([{ address, family: 6 }]),
      });
      await expect(policy.resolve('cdn.example'), address).rejects.toThrow(`refused to download from cdn.example`);
    }
  });
});

describe('the saved type comes from the bytes', () => {
  it('refuses HTML served as image/png, and saves a PNG served as text/html as .png', async () => {
    const server = await files((url) =>
      url === '/html'
        ? { status: 200, headers: { 'content-type': 'image/png' }, body: '<!doctype html><script>alert(1)</script>' }
        : url === '/png'
          ? { status: 200, headers: { 'content-type': 'text/html' }, body: PNG }
          : { status: 200, headers: {}, body: JPEG },
    );
    const { activities } = activitiesFor('http://127.0.0.1:9/x', {}, { outputRoot: out.dir });
    const html = await runActivity(() => activities.downloadImages(input([`${server.origin}/html`])));
    expect([html.failure?.type, html.failure?.nonRetryable]).toEqual([FailureType.DownloadFailed, true]);
    expect(html.failure?.message).toMatch(/not an image: .*"<!doctype html><".*content type "image\/png" ignored/);
    const png = await runActivity(() => activities.downloadImages(input([`${server.origin}/png`], 'cr_2')));
    expect(png.value?.[0]?.path).toBe('row-1/cr_2-0.png');
    const jpeg = await runActivity(() => activities.downloadImages(input([`${server.origin}/x.html`], 'cr_3')));
    expect(jpeg.value?.[0]?.path).toBe('row-1/cr_3-0.jpg');
    const saved = await readdir(path.join(out.dir, 'o', 'row-1'));
    expect(saved.filter((f) => !f.endsWith('.json')).sort()).toEqual(['cr_2-0.png', 'cr_3-0.jpg']);
  });

  it('recognises PNG, JPEG, GIF, WebP and AVIF, and nothing else', () => {
    const b = (s: string) => Buffer.from(s, 'latin1');
    const avif = Buffer.concat([Buffer.from('0000001c', 'hex'), b('ftypavif'), Buffer.alloc(4), b('avifmif1miaf')]);
    const heic = Buffer.concat([Buffer.from('00000018', 'hex'), b('ftypheic'), Buffer.alloc(4), b('mif1heic')]);
    expect(sniffImageType(PNG, true)).toBe('png');
    expect(sniffImageType(JPEG, true)).toBe('jpg');
    expect(sniffImageType(b('GIF89a\x01\x00'), true)).toBe('gif');
    expect(sniffImageType(b('RIFF\x00\x00\x00\x00WEBPVP8 '), true)).toBe('webp');
    expect(sniffImageType(avif, true)).toBe('avif');
    expect(sniffImageType(heic, true)).toBeNull();
    expect(sniffImageType(b('RIFF\x00\x00\x00\x00WAVEfmt '), true)).toBeNull();
    expect(sniffImageType(b('<svg xmlns="http://www.w3.org/2000/svg">'), true)).toBeNull();
    expect(sniffImageType(b('BM'), true)).toBeNull();
    expect(sniffImageType(PNG.subarray(0, 4), false)).toBeUndefined();
    expect(sniffImageType(PNG.subarray(0, 4), true)).toBeNull();
  });
});

describe('a creation brings at most what was asked for', () => {
  const createInput = (numImages?: number) => ({
    idempotencyKey: 'ib.b1.row-1.a1',
    request: { prompt: 'p', model: 'flux-dev', ...(numImages === undefined ? {} : { num_images: numImages }) },
    batchId: 'b1',
    rowId: 'row-1',
    outDir: 'o',
    maxPollWaitMs: 30 * 60_000,
  });

  async function serviceListing(images: unknown[]) {
    const api = await startStub(() => ({
      status: 200,
      body: { id: 'cr_1', status: 'succeeded', cost_usd: 0.04, images },
    }));
    servers.push(api);
    return api;
  }

  it('refuses 1,000 image URLs for num_images=1 with a clear error, downloading none, and stays small', async () => {
    const imgs = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const api = await serviceListing(Array.from({ length: 1000 }, (_, i) => ({ url: `${imgs.origin}/${i}.png` })));
    const { activities, clock } = activitiesFor(api.url, {}, { outputRoot: out.dir });
    const r = await runActivity(() => activities.createImage(createInput(1)), {
      heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 5_000, costUsd: 0.04 },
    });
    // Every row would be refused the same: the batch stops (images refused), the row keeping its creation.
    expect([r.failure?.type, r.failure?.nonRetryable]).toEqual([FailureType.BatchStop, true]);
    expect(r.failure?.details?.[0]).toMatchObject({ reason: 'images_refused' });
    expect(r.failure?.message).toMatch(
      /creation cr_1 lists at least 16 images for num_images=1 \(at most 3 are accepted\)/,
    );
    expect(imgs.requests).toHaveLength(0);
    expect(JSON.stringify({ message: r.failure?.message, details: r.failure?.details }).length).toBeLessThan(1024);
  });

  it('keeps a poll of 44,001 image URLs far below the payload limit', async () => {
    const url = `http://files.example/${'x'.repeat(40)}.png`;
    const api = await serviceListing(Array.from({ length: 44_001 }, () => ({ url })));
    // The service's answers may be larger than the default 1 MiB: the list is cut all the same.
    const { activities } = activitiesFor(api.url, { maxResponseBytes: 8 * 1024 * 1024 }, { outputRoot: out.dir });
    const r = await runActivity(() => activities.pollCreation({ creationId: 'cr_1' }));
    expect(r.failure).toBeUndefined();
    expect(JSON.stringify(r.value).length).toBeLessThan(64 * 1024);
  });

  it('accepts num_images plus two, and refuses an image URL longer than 2 KiB', async () => {
    const imgs = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: PNG }));
    const three = Array.from({ length: 3 }, (_, i) => ({ url: `${imgs.origin}/${i}.png` }));
    const api = await serviceListing(three);
    const { activities, clock } = activitiesFor(api.url, {}, { outputRoot: out.dir });
    const ok = await runActivity(() => activities.createImage(createInput()), {
      heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 5_000 },
    });
    expect(ok.failure).toBeUndefined();
    expect(ok.value).toMatchObject({ outcome: 'succeeded' });

    const long = await serviceListing([{ url: `${imgs.origin}/${'a'.repeat(100_000)}.png` }]);
    const other = activitiesFor(long.url, {}, { outputRoot: out.dir });
    const r = await runActivity(() => other.activities.createImage({ ...createInput(), rowId: 'row-2' }), {
      heartbeatDetails: { creationId: 'cr_9', acceptedAtMs: other.clock.t - 5_000 },
    });
    expect([r.failure?.type, r.failure?.nonRetryable]).toEqual([FailureType.BatchStop, true]);
    expect(r.failure?.message).toMatch(/URL longer than 2048 characters/);
    expect(JSON.stringify({ message: r.failure?.message, details: r.failure?.details }).length).toBeLessThan(6000);
  });

  it('holds a creation to num_images × IMAGEGEN_MAX_DOWNLOAD_BYTES in all (a size is no stop: another may fit)', async () => {
    const big = Buffer.concat([PNG, Buffer.alloc(60_000)]);
    const imgs = await files(() => ({ status: 200, headers: { 'content-type': 'image/png' }, body: big }));
    const api = await serviceListing([{ url: `${imgs.origin}/0.png` }, { url: `${imgs.origin}/1.png` }]);
    const { activities, clock } = activitiesFor(api.url, { maxDownloadBytes: 100_000 }, { outputRoot: out.dir });
    const r = await runActivity(() => activities.createImage(createInput(1)), {
      heartbeatDetails: { creationId: 'cr_1', acceptedAtMs: clock.t - 5_000 },
    });
    expect([r.failure?.type, r.failure?.nonRetryable]).toEqual([FailureType.DownloadFailed, true]);
    expect(r.failure?.message).toMatch(
      /image 1 .*exceeds what is left \(\d+ bytes\) of the creation's budget of 100000/,
    );
  });
});
