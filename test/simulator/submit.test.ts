import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/api/contract';
import { DEMO_API_KEY, type Simulator } from '../../src/simulator';
import {
  call,
  expectError,
  expectChargesConsistent,
  expectRetryAfter,
  netCharged,
  OTHER_ACCOUNT_KEY,
  PROMPT,
  SECOND_KEY,
  startTestSim,
  submit,
} from './helpers';

let sim: Simulator;
afterEach(async () => {
  expectChargesConsistent(sim);
  await sim.close();
});

describe('POST /creations: acceptance and charge', () => {
  it('accepts with 202 and a creation record, charging price x num_images up front', async () => {
    ({ sim } = await startTestSim());
    const reply = await submit(sim, {
      prompt: PROMPT,
      model: 'flux-dev',
      num_images: 3,
      width: 512,
      height: 768,
      seed: 7,
    });
    expect(reply.status).toBe(202);
    expect(reply.body).toMatchObject({
      id: expect.stringMatching(/^cr_/) as unknown,
      status: 'queued',
      model: 'flux-dev',
      prompt: PROMPT,
      width: 512,
      height: 768,
      seed: 7,
      num_images: 3,
      cost_usd: 0.12,
    });
    expect(sim.walletUsd('acct_demo')).toBeCloseTo(100 - 0.12, 10);
    const [entry] = sim.charges.entries();
    expect(entry).toMatchObject({ kind: 'charge', keyId: 'key_demo', creationId: reply.body.id, amountUsd: 0.12 });
    expect(JSON.stringify(sim.charges.snapshot())).not.toContain('img_live_');
  });
});

describe('POST /creations: validation (400, nothing charged)', () => {
  it('lists every problem at once in details.errors as {field, message}', async () => {
    ({ sim } = await startTestSim());
    const reply = await submit(sim, {
      prompt: '   ',
      negative_prompt: 'x'.repeat(2001),
      width: 300,
      height: 4096,
      seed: -1,
      num_images: 5,
      style: 'vivid',
    });
    expectError(reply, 400, ErrorCode.InvalidRequest);
    const fields = (reply.body.error.details.errors as { field: string; message: string }[]).map((e) => e.field);
    expect(fields.sort()).toEqual([
      'height',
      'model',
      'negative_prompt',
      'num_images',
      'prompt',
      'seed',
      'style',
      'width',
    ]);
    for (const e of reply.body.error.details.errors) expect(e.message).toEqual(expect.any(String) as unknown);
    expect(reply.body.error.details.errors).toContainEqual({ field: 'width', message: 'must be a multiple of 64' });
    expect(sim.charges.entries()).toEqual([]);
  });

  it('enforces the edges of each range', async () => {
    ({ sim } = await startTestSim());
    const ok = await submit(sim, {
      prompt: 'p'.repeat(4000),
      model: 'flux-dev',
      negative_prompt: 'n'.repeat(2000),
      width: 2048,
      height: 256,
      seed: 2 ** 32 - 1,
      num_images: 4,
    });
    expect(ok.status).toBe(202);
    const tooLong = await submit(sim, { prompt: 'p'.repeat(4001), model: 'flux-dev' });
    expect(tooLong.body.error.details.errors).toEqual([
      { field: 'prompt', message: 'must be at most 4000 characters' },
    ]);
    const seed = await submit(sim, { prompt: PROMPT, model: 'flux-dev', seed: 2 ** 32 });
    expect(seed.body.error.details.errors).toEqual([{ field: 'seed', message: 'must be between 0 and 4294967295' }]);
  });

  const hostile: [name: string, raw: string | Buffer, contentType: string | null][] = [
    ['invalid JSON', '{"prompt": ', 'application/json'],
    ['a JSON array', '[1,2,3]', 'application/json'],
    ['JSON null', 'null', 'application/json'],
    ['a JSON string', '"hello"', 'application/json'],
    ['an empty body', '', 'application/json'],
    ['wrong content type', JSON.stringify({ prompt: PROMPT, model: 'flux-dev' }), 'text/plain'],
    ['no content type', JSON.stringify({ prompt: PROMPT, model: 'flux-dev' }), null],
    ['form encoding', 'prompt=x&model=flux-dev', 'application/x-www-form-urlencoded'],
    [
      'wrong types',
      JSON.stringify({ prompt: ['x'], model: 42, width: '512', seed: 1.5, num_images: null }),
      'application/json',
    ],
    [
      'prototype keys',
      '{"__proto__": {"admin": true}, "constructor": 1, "prompt": "a b c", "model": "flux-dev"}',
      'application/json',
    ],
    ['deep nesting', '['.repeat(20000) + ']'.repeat(20000), 'application/json'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'application/json'],
    [
      'a huge body (200 KiB)',
      JSON.stringify({ prompt: 'x'.repeat(200 * 1024), model: 'flux-dev' }),
      'application/json',
    ],
    ['a huge number', '{"prompt":"a b c","model":"flux-dev","width":1e400}', 'application/json'],
  ];

  it.each(hostile)('%s: 400 ERR_INVALID_REQUEST, never 500, nothing charged', async (_name, raw, contentType) => {
    ({ sim } = await startTestSim());
    const reply = await call(sim, 'POST', '/creations', { raw, contentType });
    expectError(reply, 400, ErrorCode.InvalidRequest);
    expect(reply.body.error.details.errors.length).toBeGreaterThan(0);
    expect(sim.charges.entries()).toEqual([]);
    // The connection and the server are still fine afterwards.
    expect((await call(sim, 'GET', '/models')).status).toBe(200);
  });

  it('a body far beyond the cap still gets a 400 and the server survives', async () => {
    ({ sim } = await startTestSim({ maxBodyBytes: 1024 }));
    const reply = await call(sim, 'POST', '/creations', { raw: Buffer.alloc(1024 * 64, 0x61) }).catch(
      (err: Error) => err,
    );
    if (!(reply instanceof Error)) expectError(reply, 400, ErrorCode.InvalidRequest);
    expect((await call(sim, 'GET', '/models')).status).toBe(200);
    expect(sim.charges.entries()).toEqual([]);
  });
});

describe('POST /creations: model, wallet and budget', () => {
  it('404 ERR_MODEL_NOT_FOUND for a model the account may not use, or that does not exist', async () => {
    ({ sim } = await startTestSim());
    expectError(
      await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { key: OTHER_ACCOUNT_KEY }),
      404,
      ErrorCode.ModelNotFound,
    );
    expectError(await submit(sim, { prompt: PROMPT, model: 'dall-e-9' }), 404, ErrorCode.ModelNotFound);
    expect((await submit(sim, { prompt: PROMPT, model: 'sdxl' }, { key: OTHER_ACCOUNT_KEY })).status).toBe(202);
  });

  it('402 with required, balance and top_up_url when the wallet cannot cover the request', async () => {
    ({ sim } = await startTestSim());
    sim.setWallet('acct_demo', 0.05);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
    const reply = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expectError(reply, 402, ErrorCode.InsufficientBalance);
    expect(reply.body.error.details).toEqual({
      required: 0.04,
      balance: 0.01,
      top_up_url: expect.stringMatching(/^https?:\/\//) as unknown,
    });
    expect(netCharged(sim)).toBeCloseTo(0.04, 10);
  });

  it('402 monthly_budget_exceeded with the cap, per key, resetting with the month', async () => {
    const { sim: s, clock } = await startTestSim();
    sim = s;
    sim.setMonthlyBudget('key_demo', 0.1);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev', num_images: 2 })).status).toBe(202);
    const reply = await submit(sim, { prompt: PROMPT, model: 'flux-dev', num_images: 1 });
    expectError(reply, 402, ErrorCode.InsufficientBalance);
    expect(reply.body.error.details).toEqual({
      reason: 'monthly_budget_exceeded',
      monthly_cap_usd: 0.1,
      required: 0.04,
      top_up_url: expect.any(String) as unknown,
    });
    // The other key of the account has no cap.
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { key: SECOND_KEY })).status).toBe(202);
    clock.advance(40 * 24 * 3600 * 1000);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
  });
});

describe('limits: 429 with Retry-After, nothing charged', () => {
  it('per-key token bucket: burst, then ERR_RATE_LIMIT until a token is back', async () => {
    const { sim: s, clock } = await startTestSim({ limits: { requestsPerSecond: 2, burst: 3 } });
    sim = s;
    for (let i = 0; i < 3; i++) expect((await call(sim, 'GET', '/models')).status).toBe(200);
    const limited = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expectError(limited, 429, ErrorCode.RateLimit);
    expect(expectRetryAfter(limited)).toBe(1);
    expect(sim.charges.entries()).toEqual([]);
    // Another key has its own bucket.
    expect((await call(sim, 'GET', '/models', { key: SECOND_KEY })).status).toBe(200);
    clock.advance(500);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
  });

  it('account concurrency: ERR_QUOTA_EXCEEDED with scope/reason/limit until a creation finishes', async () => {
    const { sim: s, clock } = await startTestSim({ limits: { accountConcurrency: 2 } });
    sim = s;
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
    clock.advance(1500);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
    const full = await submit(sim, { prompt: PROMPT, model: 'flux-dev' });
    expectError(full, 429, ErrorCode.QuotaExceeded);
    expect(full.body.error.details).toEqual({ scope: 'account', reason: 'concurrency_limit', limit: 2 });
    // The first creation finishes 4 s after acceptance: 2.5 s from now, rounded up.
    expect(expectRetryAfter(full)).toBe(3);
    // Another account is not affected.
    expect((await submit(sim, { prompt: PROMPT, model: 'sdxl' }, { key: OTHER_ACCOUNT_KEY })).status).toBe(202);
    expect(sim.charges.entries().filter((e) => e.keyId === 'key_demo')).toHaveLength(2);
    clock.advance(2500);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
  });

  it('model capacity across accounts: scope model, reason capacity', async () => {
    ({ sim } = await startTestSim({ limits: { modelCapacity: 1 } }));
    expect((await submit(sim, { prompt: PROMPT, model: 'sdxl' })).status).toBe(202);
    const full = await submit(sim, { prompt: PROMPT, model: 'sdxl' }, { key: OTHER_ACCOUNT_KEY });
    expectError(full, 429, ErrorCode.QuotaExceeded);
    expect(full.body.error.details).toMatchObject({ scope: 'model', reason: 'capacity' });
    expectRetryAfter(full);
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
  });

  it('the rate limit is checked before validation, and quota before the idempotency look-up', async () => {
    const { sim: s, clock } = await startTestSim({ limits: { requestsPerSecond: 1, burst: 1, accountConcurrency: 1 } });
    sim = s;
    expect((await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'a' })).status).toBe(202);
    expectError(await submit(sim, { bad: true }), 429, ErrorCode.RateLimit);
    clock.advance(1000);
    // Same key and body would replay, but the quota check comes first.
    const quota = await submit(sim, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: 'a' });
    expectError(quota, 429, ErrorCode.QuotaExceeded);
  });
});

describe('clients that go away', () => {
  it('a client that disconnects mid-body costs nothing and breaks nothing', async () => {
    ({ sim } = await startTestSim());
    const { port } = sim;
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          'POST /api/public/v1/creations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
            `Authorization: Bearer ${DEMO_API_KEY}\r\nContent-Length: 1000\r\n\r\n{"prompt":`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 30);
      });
      socket.on('error', reject);
    });
    await new Promise((r) => setTimeout(r, 30));
    expect((await call(sim, 'GET', '/models')).status).toBe(200);
    expect(sim.charges.entries()).toEqual([]);
  });
});
