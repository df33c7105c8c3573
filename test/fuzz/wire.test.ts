import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { downloadImages } from '../../src/activities/download';
import { ImageApiClient } from '../../src/api/client';
import { FailureType } from '../../src/model';
import { createDownloadDispatcher, createServiceDispatcher, send, type SendResult } from '../../src/api/http';
import { defaultServiceConfig } from '../../src/config/service-config';
import { type ServiceConfig } from '../../src/api/service-config';
import { activitiesFor, runActivity, tempDir } from '../activities/helpers';
import { SECRET_KEY } from '../api/helpers/stub-server';
import { within } from '../integration/helpers';
import { head, startRawServer, type RawServer, type RawStep } from './raw-server';
import { runs } from './runs';

/**
 * The HTTP layer against a peer that lies: Content-Length larger or smaller than the body, two of them, a body
 * that never ends or drips a byte every 100 ms, a status line that is not one, a body far over the limit. Through
 * `send()`, the whole client and the image download, every case must end within a bound with an error or an
 * outcome, and never read more than the size limit.
 */

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c().catch(() => undefined)));
});

/** Timeouts of these tests: short, so the cases are quick; the deadline is the shortest, to show it is the bound. */
const TIMEOUTS = { headersTimeoutMs: 3000, bodyTimeoutMs: 3000, requestTimeoutMs: 1500 } as const;
/** Every case must end well within this: far above the timeouts above, far below "never". */
const BOUND_MS = 20_000;
const MAX_BYTES = 64 * 1024;

async function server(answer: (i: number) => RawStep[]): Promise<RawServer> {
  const s = await startRawServer((_req, i) => answer(i));
  closers.push(() => s.close());
  return s;
}

function config(s: RawServer, overrides: Partial<ServiceConfig> = {}): ServiceConfig {
  return defaultServiceConfig({ baseUrl: s.url, ...TIMEOUTS, maxResponseBytes: MAX_BYTES, ...overrides });
}

async function sendTo(s: RawServer, overrides: Partial<ServiceConfig> = {}): Promise<SendResult> {
  const c = config(s, overrides);
  // No `requestTimeoutMs` here: the dispatcher made from the configuration carries it.
  const dispatcher = createServiceDispatcher(c);
  try {
    return await within(
      'send',
      BOUND_MS,
      send({
        dispatcher,
        url: `${s.url}/creations/cr_1`,
        method: 'GET',
        headers: { accept: 'application/json' },
        headersTimeoutMs: c.headersTimeoutMs,
        bodyTimeoutMs: c.bodyTimeoutMs,
        maxBytes: c.maxResponseBytes,
      }),
    );
  } finally {
    await dispatcher.destroy();
  }
}

const JSON_HEAD = { 'content-type': 'application/json' };
const BODY = '{"id":"cr_1","status":"queued"}';

/** Each lie, and what `send` must make of it (`error` is a pattern the error must match). */
const LIES: { name: string; steps: RawStep[]; status?: number; error: RegExp }[] = [
  {
    name: 'Content-Length larger than the body, then the connection closes',
    steps: [{ write: head('200 OK', { ...JSON_HEAD, 'content-length': 100 }) + BODY }, { end: true }],
    status: 200,
    error: /closed|terminated|socket|aborted/i,
  },
  {
    name: 'Content-Length larger than the body, then silence',
    steps: [{ write: head('200 OK', { ...JSON_HEAD, 'content-length': 100 }) + BODY }, { hang: true }],
    status: 200,
    error: /REQUEST_TIMEOUT/,
  },
  {
    name: 'two different Content-Lengths',
    steps: [{ write: `HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 31\r\n\r\n${BODY}` }, { hang: true }],
    error: /content-length|HPE|parse|invalid/i,
  },
  {
    name: 'Content-Length and chunked together',
    steps: [
      { write: `HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n` },
      { hang: true },
    ],
    error: /content-length|transfer-encoding|HPE|parse|invalid/i,
  },
  {
    name: 'a chunked body that stops and never ends',
    steps: [
      { write: head('200 OK', { ...JSON_HEAD, 'transfer-encoding': 'chunked' }) + '5\r\n{"id"\r\n' },
      { hang: true },
    ],
    status: 200,
    error: /REQUEST_TIMEOUT/,
  },
  {
    name: 'a chunked body that never ends, flooding',
    steps: [
      { write: head('200 OK', { ...JSON_HEAD, 'transfer-encoding': 'chunked' }) },
      { flood: Buffer.from(`4000\r\n${'a'.repeat(0x4000)}\r\n`) },
    ],
    status: 200,
    error: new RegExp(`larger than ${MAX_BYTES} bytes`),
  },
  {
    name: 'a body dripping one byte every 100 ms',
    steps: [{ write: head('200 OK', { ...JSON_HEAD, 'content-length': 50_000 }) }, { drip: BODY, everyMs: 100 }],
    status: 200,
    error: /REQUEST_TIMEOUT: no complete response within 1500 ms/,
  },
  {
    name: 'headers dripping one byte every 100 ms',
    steps: [{ drip: 'HTTP/1.1 200 OK\r\nx-a: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', everyMs: 100 }],
    error: /REQUEST_TIMEOUT/,
  },
  {
    name: 'a status line that is not one',
    steps: [{ write: 'HTTP/1.1 abc\r\n\r\n' }, { hang: true }],
    error: /HPE|parse|invalid|status/i,
  },
  {
    name: 'no HTTP at all',
    steps: [{ write: Buffer.from([0x00, 0xff, 0x13, 0x37, 0x0d, 0x0a, 0x0d, 0x0a]) }, { hang: true }],
    error: /HPE|parse|invalid|expected/i,
  },
  {
    name: 'a header line of a megabyte',
    steps: [{ write: `HTTP/1.1 200 OK\r\nx-big: ${'b'.repeat(1024 * 1024)}\r\n\r\n` }, { hang: true }],
    error: /header|overflow|HPE|size/i,
  },
  {
    name: 'an interim 100 Continue nobody asked for, then nothing',
    steps: [{ write: 'HTTP/1.1 100 Continue\r\n\r\n' }, { hang: true }],
    error: /bad response/,
  },
  {
    name: 'an honest Content-Length over the limit (refused before reading)',
    steps: [
      { write: head('200 OK', { ...JSON_HEAD, 'content-length': 10 * MAX_BYTES }) },
      { flood: Buffer.alloc(4096, 0x61) },
    ],
    status: 200,
    error: new RegExp(`${10 * MAX_BYTES} bytes declared, larger than ${MAX_BYTES}`),
  },
  {
    name: 'no Content-Length, a body until the connection closes, far over the limit',
    steps: [{ write: head('200 OK', { ...JSON_HEAD, connection: 'close' }) }, { flood: Buffer.alloc(16_384, 0x61) }],
    status: 200,
    error: new RegExp(`larger than ${MAX_BYTES} bytes`),
  },
  {
    name: 'a reset after the headers',
    steps: [{ write: head('200 OK', { ...JSON_HEAD, 'content-length': 100 }) + '{"i' }, { destroy: true }],
    status: 200,
    error: /closed|terminated|socket|reset|aborted/i,
  },
];

describe('send() against a lying peer', () => {
  it.each(LIES)('$name: ends with an error, within the bound', async ({ steps, status, error }) => {
    const s = await server(() => steps);
    const res = await sendTo(s);
    expect(res.error).toMatch(error);
    expect(res.status).toBe(status);
    expect(res.body).toBeUndefined();
  });

  it('a Content-Length smaller than the body gives exactly the declared bytes, never more', async () => {
    const s = await server(() => [{ write: head('200 OK', { ...JSON_HEAD, 'content-length': 5 }) + BODY }]);
    const res = await sendTo(s);
    expect(res).toMatchObject({ status: 200, body: BODY.slice(0, 5) });
    expect(res.error).toBeUndefined();
  });

  it('random lies about the length: the declared bytes when they all come, else an error; never over the limit', async () => {
    const shape = fc.record({
      declared: fc.nat({ max: 3000 }),
      sent: fc.nat({ max: 3000 }),
      maxBytes: fc.integer({ min: 1, max: 2500 }),
      chunked: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(shape, async ({ declared, sent, maxBytes, chunked }) => {
        const payload = Buffer.alloc(sent, 0x7a);
        const steps: RawStep[] = chunked
          ? [
              { write: head('200 OK', { 'transfer-encoding': 'chunked' }) },
              // A chunk that claims `declared` bytes, then `sent` of them, then the end.
              { write: `${declared.toString(16)}\r\n` },
              { write: payload },
              { end: true },
            ]
          : [{ write: head('200 OK', { 'content-length': declared }) }, { write: payload }, { end: true }];
        const raw = await startRawServer(() => steps);
        try {
          const res = await sendTo(raw, { maxResponseBytes: maxBytes });
          if (res.body !== undefined) {
            expect(res.body.length).toBeLessThanOrEqual(maxBytes);
            // A complete answer only ever has the declared length (a chunked one also needs its end marker).
            expect(chunked).toBe(false);
            expect(sent >= declared && declared <= maxBytes).toBe(true);
            expect(res.body).toBe('z'.repeat(declared));
          } else {
            expect(res.error).toBeTruthy();
            if (!chunked && sent >= declared && declared <= maxBytes) expect.fail(`lost a complete body: ${res.error}`);
          }
        } finally {
          await raw.close();
        }
      }),
      { numRuns: runs(150) },
    );
  });
});

describe('the client against a lying peer', () => {
  async function client(s: RawServer): Promise<ImageApiClient> {
    const c = new ImageApiClient({ config: config(s), apiKey: () => SECRET_KEY });
    closers.push(() => c.close());
    return c;
  }
  const submission = { idempotencyKey: 'ib.b1.r1.a1', request: { prompt: 'p', model: 'flux-dev' } };

  it.each(LIES)('$name: a submission is an unknown outcome (the same key again), a poll too', async ({ steps }) => {
    const s = await server(() => steps);
    const c = await client(s);
    const [submitted, polled] = await within(
      'submit and poll',
      BOUND_MS,
      Promise.all([c.submit(submission), c.getCreation('cr_1')]),
    );
    expect(submitted.kind).toBe('ambiguous');
    expect(polled.kind).toBe('ambiguous');
    const text = JSON.stringify([submitted, polled]);
    expect(text).not.toContain(SECRET_KEY);
  });

  it('a submission that runs out of time is ambiguous and says which deadline', async () => {
    const s = await server(() => [
      { write: head('202 Accepted', { ...JSON_HEAD, 'content-length': 500 }) },
      { drip: BODY, everyMs: 100 },
    ]);
    const c = await client(s);
    const out = await within('submit', BOUND_MS, c.submit(submission));
    expect(out).toMatchObject({ kind: 'ambiguous', httpStatus: 202 });
    expect(out.kind === 'ambiguous' && out.lastError).toMatch(/REQUEST_TIMEOUT.*IMAGEGEN_REQUEST_TIMEOUT_MS/);
  });

  it('the submit activity retries a timed-out submission with the same key, then ends Unknown with the reason', async () => {
    const s = await server(() => [
      { write: head('202 Accepted', { ...JSON_HEAD, 'content-length': 500 }) },
      { drip: BODY, everyMs: 100 },
    ]);
    const { activities } = activitiesFor(s.url, { ...TIMEOUTS, maxAmbiguousTries: 2 });
    const input = { idempotencyKey: 'ib.b1.r1.a1', request: { prompt: 'p', model: 'flux-dev' } };
    const first = await within(
      'attempt 1',
      BOUND_MS,
      runActivity(() => activities.submitCreation(input)),
    );
    expect(first.failure?.type).toBe(FailureType.Ambiguous);
    expect(first.failure?.nonRetryable).toBe(false);
    const second = await within(
      'attempt 2',
      BOUND_MS,
      runActivity(() => activities.submitCreation(input), { heartbeatDetails: { ambiguousTries: 1 } }),
    );
    expect(second.failure?.type).toBe(FailureType.Unknown);
    expect((second.failure?.details?.[0] as { lastError: string }).lastError).toMatch(/REQUEST_TIMEOUT/);
    expect(s.requests.map((r) => r.header('idempotency-key'))).toEqual(['ib.b1.r1.a1', 'ib.b1.r1.a1']);
  });
});

describe('image downloads from a lying peer', () => {
  async function download(s: RawServer, maxBytes = MAX_BYTES) {
    const out = await tempDir();
    closers.push(out.cleanup);
    const c = config(s, { maxDownloadBytes: maxBytes });
    const dispatcher = createDownloadDispatcher(c);
    closers.push(() => dispatcher.destroy());
    const input = { batchId: 'b1', rowId: 'r1', creationId: 'cr_1', images: [{ url: `${s.origin}/i/0` }], outDir: 'o' };
    let failure: ApplicationFailure | undefined;
    try {
      await within(
        'download',
        BOUND_MS,
        downloadImages(input, {
          dispatcher,
          outputRoot: out.dir,
          maxBytes,
          maxRedirects: 2,
          headersTimeoutMs: c.headersTimeoutMs,
          bodyTimeoutMs: c.bodyTimeoutMs,
          defaultRetryAfterMs: 1000,
          now: Date.now,
        }),
      );
    } catch (err) {
      if (!(err instanceof ApplicationFailure)) throw err;
      failure = err;
    }
    const rowDir = path.join(out.dir, 'o', 'r1');
    return { failure, files: await readdir(rowDir), rowDir };
  }
  const PNG = { 'content-type': 'image/png' };

  it.each([
    {
      name: 'a body dripping one byte every 100 ms',
      steps: [{ write: head('200 OK', { ...PNG, 'content-length': 50_000 }) }, { drip: 'GIF89a', everyMs: 100 }],
      retryable: true,
      reason: /REQUEST_TIMEOUT/,
    },
    {
      name: 'an error page dripping forever',
      steps: [{ write: head('500 Oops', { 'content-length': 100_000 }) }, { drip: 'err', everyMs: 100 }],
      retryable: true,
      reason: /HTTP 500/,
    },
    {
      name: 'redirects that drip their bodies',
      steps: [
        { write: head('302 Found', { location: '/i/1', 'content-length': 100_000 }) },
        { drip: 'r', everyMs: 100 },
      ],
      retryable: true,
      reason: /REQUEST_TIMEOUT|redirects/,
    },
    {
      name: 'Content-Length larger than the body, then close',
      steps: [{ write: head('200 OK', { ...PNG, 'content-length': 5000 }) + 'png' }, { end: true }],
      retryable: true,
      reason: /interrupted/,
    },
    {
      name: 'an honest Content-Length over the limit',
      steps: [{ write: head('200 OK', { ...PNG, 'content-length': 10 * MAX_BYTES }) }, { flood: Buffer.alloc(4096) }],
      retryable: false,
      reason: new RegExp(`${10 * MAX_BYTES} bytes exceeds the limit`),
    },
    {
      name: 'no Content-Length, streaming forever',
      steps: [{ write: head('200 OK', { ...PNG, connection: 'close' }) }, { flood: Buffer.alloc(16_384) }],
      retryable: false,
      reason: new RegExp(`exceeds the limit of ${MAX_BYTES} bytes`),
    },
    {
      name: 'a chunked body flooding forever',
      steps: [
        { write: head('200 OK', { ...PNG, 'transfer-encoding': 'chunked' }) },
        { flood: Buffer.from(`4000\r\n${'a'.repeat(0x4000)}\r\n`) },
      ],
      retryable: false,
      reason: new RegExp(`exceeds the limit of ${MAX_BYTES} bytes`),
    },
    {
      name: 'a status line that is not one',
      steps: [{ write: 'HTTP/1.1 abc\r\n\r\n' }, { hang: true }],
      retryable: true,
      reason: /HPE|parse|invalid|status/i,
    },
  ] as { name: string; steps: RawStep[]; retryable: boolean; reason: RegExp }[])(
    '$name: fails within the bound, leaving no file',
    async ({ steps, retryable, reason }) => {
      const s = await server(() => steps);
      const { failure, files } = await download(s);
      expect(failure?.type).toBe(FailureType.DownloadFailed);
      expect(failure?.nonRetryable).toBe(!retryable);
      expect((failure?.details?.[0] as { reason: string }).reason).toMatch(reason);
      expect(files).toEqual([]);
    },
  );

  it('a Content-Length smaller than the body saves exactly the declared bytes', async () => {
    // The saved type comes from the bytes (a GIF's signature is plain ASCII), not from the Content-Type.
    const s = await server(() => [{ write: head('200 OK', { ...PNG, 'content-length': 6 }) + 'GIF89a-and-more' }]);
    const { failure, files, rowDir } = await download(s);
    expect(failure).toBeUndefined();
    expect(files.sort()).toEqual(['cr_1-0.gif', 'cr_1-0.json']);
    expect((await stat(path.join(rowDir, 'cr_1-0.gif'))).size).toBe(6);
  });
});
