import path from 'node:path';
import { inspect } from 'node:util';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createActivitiesWithSteps } from '../../src/activities';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import { defaultServiceConfig } from '../../src/config/service-config';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { capturingLogger, tempDir } from './helpers';
import { lazyTempLedger } from '../helpers/ledger';

/**
 * Runs the activities through every error path with a recognisable key, capturing everything they produce
 * (results, failures with their details and stacks, our logs, Temporal's activity logs, the console), and
 * checks that the key appears nowhere, not even when the service echoes it back.
 */

const TOKEN = SECRET_KEY.slice(SECRET_KEY.indexOf('live_') + 5);
const env = (code: string, message: string, details?: unknown) => ({ error: { code, message, details } });

const SUBMIT_REPLIES: StubReply[] = [
  { status: 202, body: { id: 'cr_1', status: 'queued' } },
  {
    status: 400,
    body: env(ErrorCode.InvalidRequest, `bad header Bearer ${SECRET_KEY}`, {
      errors: [{ field: 'auth', message: SECRET_KEY }],
    }),
  },
  { status: 401, body: { detail: 'api_key_invalid' } },
  { status: 401, body: { detail: `unknown key ${SECRET_KEY}` } },
  {
    status: 402,
    body: env(ErrorCode.InsufficientBalance, 'pay', { required: 0.04, top_up_url: `https://portal/?k=${SECRET_KEY}` }),
  },
  { status: 403, body: { detail: 'account_disabled' } },
  { status: 404, body: env(ErrorCode.ModelNotFound, `model not found for ${SECRET_KEY}`) },
  { status: 429, headers: { 'retry-after': '0' }, body: env(ErrorCode.RateLimit, `key ${SECRET_KEY} too fast`) },
  { status: 500, body: env(ErrorCode.Internal, `trace: authorization=Bearer ${SECRET_KEY}`) },
  { status: 502, body: env(ErrorCode.GenerationFailed, SECRET_KEY) },
  { status: 503, headers: { 'retry-after': '0' }, body: env(ErrorCode.ProviderUnavailable, SECRET_KEY) },
  { status: 202, body: `<html>${SECRET_KEY}</html>` },
  { status: 418, body: `I'm a teapot ${SECRET_KEY}` },
  { reset: true },
  { hang: true },
  { status: 202, stream: { bytes: 100_000 } },
];

const POLL_REPLIES: StubReply[] = [
  { status: 200, body: { id: 'c', status: 'running' } },
  { status: 200, body: { id: 'c', status: 'failed', error: FailureMessage.Failed } },
  { status: 200, body: { id: 'c', status: 'failed', error: `odd ${SECRET_KEY}` } },
  { status: 404, body: env(ErrorCode.NotFound, SECRET_KEY) },
  { status: 401, body: { detail: 'authentication_required' } },
  { status: 429, headers: { 'retry-after': '0' }, body: env(ErrorCode.RateLimit, SECRET_KEY) },
  { status: 500, body: SECRET_KEY },
  { status: 200, body: `{${SECRET_KEY}` },
  { reset: true },
];

let api: StubServer;
let files: StubServer;
let out: { dir: string; cleanup: () => Promise<void> };
let script: StubReply[] = [];
beforeAll(async () => {
  api = await startStub(() => script.shift() ?? { status: 500, body: 'script ran out' });
  files = await startStub((r) =>
    r.url === '/ok'
      ? { status: 200, headers: { 'content-type': 'image/png' }, body: Buffer.from('png') }
      : r.url === '/html'
        ? { status: 200, headers: { 'content-type': 'text/html' }, body: SECRET_KEY }
        : { status: 404, body: SECRET_KEY },
  );
  out = await tempDir();
});
afterAll(async () => {
  await api.close();
  await files.close();
  await out.cleanup();
});

describe('the API key never leaves the request headers', () => {
  it.each(['bearer', 'x-api-key'] as const)('through every path, with the %s header', async (authHeader) => {
    const captured: string[] = [];
    const ours = capturingLogger();
    const temporalLogger = new DefaultLogger('TRACE', (entry) =>
      captured.push(stringify(entry), inspect(entry, { depth: 6 })),
    );
    const consoleSpies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((m) =>
      vi.spyOn(console, m).mockImplementation((...args: unknown[]) => {
        captured.push(args.map(String).join(' '));
      }),
    );
    const activities = createActivitiesWithSteps({
      config: defaultServiceConfig({
        baseUrl: api.url,
        authHeader,
        headersTimeoutMs: 200,
        maxResponseBytes: 4096,
        maxAmbiguousTries: 2,
      }),
      ledger: lazyTempLedger(),
      apiKey: () => SECRET_KEY,
      logger: ours,
      // A folder per header style: the ledger of one run must not answer the other's keys.
      outputRoot: path.join(out.dir, authHeader),
    });
    const run = async (fn: () => Promise<unknown>, heartbeatDetails?: unknown) => {
      const mock = new MockActivityEnvironment(heartbeatDetails === undefined ? {} : { heartbeatDetails }, {
        logger: temporalLogger,
      });
      mock.on('heartbeat', (d: unknown) => captured.push(JSON.stringify(d)));
      try {
        captured.push(JSON.stringify(await mock.run(fn)));
      } catch (err) {
        expect(err).toBeInstanceOf(ApplicationFailure);
        const f = err as ApplicationFailure;
        captured.push(
          f.message,
          String(f.stack),
          stringify(f),
          stringify(f.details),
          inspect(f, { depth: 6 }),
          String(f.type),
        );
      }
    };
    try {
      script = [...SUBMIT_REPLIES];
      for (let i = 0; i < SUBMIT_REPLIES.length; i += 1) {
        await run(() => activities.submitCreation({ idempotencyKey: `k-${i}`, request: { prompt: 'p', model: 'm' } }), {
          ambiguousTries: i % 2,
        });
      }
      script = [...POLL_REPLIES];
      for (let i = 0; i < POLL_REPLIES.length; i += 1) {
        await run(() => activities.pollCreation({ creationId: `c${i}` }));
      }
      // The same answers to createImage, the activity rows run: its failures carry the key's progress as well.
      const keyInput = (idempotencyKey: string) => ({
        idempotencyKey,
        request: { prompt: 'p', model: 'm' },
        batchId: 'b',
        rowId: 'r',
        outDir: 'o',
        maxPollWaitMs: 60_000,
      });
      script = [...SUBMIT_REPLIES];
      for (let i = 0; i < SUBMIT_REPLIES.length; i += 1) {
        await run(() => activities.createImage(keyInput(`k-image-${i}`)), { ambiguousTries: i % 2 });
      }
      script = [...POLL_REPLIES];
      for (let i = 0; i < POLL_REPLIES.length; i += 1) {
        await run(() => activities.createImage(keyInput(`k-poll-${i}`)), {
          creationId: `c${i}`,
          acceptedAtMs: Date.now(),
          costUsd: 0.04,
        });
      }
      script = [
        { status: 200, body: { data: [{ id: 'm', name: SECRET_KEY.slice(0, 3) }] } },
        { status: 403, body: { detail: 'account_disabled' } },
      ];
      await run(() => activities.fetchModels());
      await run(() => activities.fetchModels());
      for (const p of ['/ok', '/html', '/missing']) {
        await run(() =>
          activities.downloadImages({
            batchId: 'b',
            rowId: 'r',
            creationId: `c${p.slice(1)}`,
            images: [{ url: `${files.origin}${p}` }],
            outDir: 'o',
          }),
        );
      }
      await run(() =>
        createActivitiesWithSteps({
          apiKey: () => `${SECRET_KEY}!`,
          config: defaultServiceConfig({ baseUrl: api.url }),
          ledger: lazyTempLedger(),
        }).fetchModels(),
      );
    } finally {
      for (const s of consoleSpies) s.mockRestore();
    }
    captured.push(JSON.stringify(ours.lines));

    // The service did receive the key (so the assertion below can fail), only in the chosen header.
    const seen = api.requests.slice(-2 * (SUBMIT_REPLIES.length + POLL_REPLIES.length) - 2);
    expect(seen.length).toBeGreaterThan(20);
    for (const r of seen) {
      expect(authHeader === 'bearer' ? r.headers.authorization : r.headers['x-api-key']).toContain(SECRET_KEY);
    }
    expect(captured.length).toBeGreaterThan(60);
    const all = captured.join('\n');
    expect(all).toContain('[REDACTED]'); // the echoes were there and were removed
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain(TOKEN.slice(0, 20));
    expect(all).not.toContain(TOKEN.slice(20));
    expect(
      files.requests.every((r) => r.headers.authorization === undefined && r.headers['x-api-key'] === undefined),
    ).toBe(true);
  });
});

function stringify(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
}
