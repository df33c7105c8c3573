import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuthDetail } from '../../src/api/contract';
import { DEMO_API_KEY, type Simulator } from '../../src/simulator';
import { call, expectChargesConsistent, OTHER_ACCOUNT_KEY, PROMPT, SECOND_KEY, startTestSim, submit } from './helpers';

describe('simulator authentication', () => {
  let sim: Simulator;
  beforeAll(async () => {
    ({ sim } = await startTestSim());
  });
  afterAll(async () => {
    await sim.close();
  });
  afterEach(() => expectChargesConsistent(sim));

  it('accepts the key in Authorization: Bearer and in X-API-Key', async () => {
    const bearer = await call(sim, 'GET', '/models', { via: 'bearer' });
    const header = await call(sim, 'GET', '/models', { via: 'x-api-key' });
    expect(bearer.status).toBe(200);
    expect(header.status).toBe(200);
    expect(bearer.body).toEqual(header.body);
    expect(bearer.body.data).toContainEqual({ id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 });
  });

  it('has the demo key in simulator format', () => {
    expect(DEMO_API_KEY).toMatch(/^img_live_[A-Za-z0-9]{40}$/);
  });

  const endpoints: [method: 'GET' | 'POST', path: string][] = [
    ['GET', '/models'],
    ['GET', '/creations/cr_unknown'],
    ['POST', '/creations'],
    ['GET', '/no-such-endpoint'],
  ];

  it.each(endpoints)('%s %s without a key: 401 authentication_required as a plain body', async (method, path) => {
    const reply = await call(sim, method, path, {
      key: null,
      json: method === 'POST' ? { prompt: PROMPT } : undefined,
    });
    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ detail: AuthDetail.AuthenticationRequired });
  });

  it('an empty bearer is no credential', async () => {
    const reply = await call(sim, 'GET', '/models', { key: null, headers: { authorization: 'Bearer ' } });
    expect(reply).toMatchObject({ status: 401, body: { detail: AuthDetail.AuthenticationRequired } });
  });

  it.each(['img_live_' + 'x'.repeat(40), 'not-a-key', `${DEMO_API_KEY}x`])(
    'an unknown key %s: 401 api_key_invalid, on both headers',
    async (key) => {
      for (const via of ['bearer', 'x-api-key'] as const) {
        const reply = await call(sim, 'GET', '/models', { key, via });
        expect(reply).toMatchObject({ status: 401, body: { detail: AuthDetail.ApiKeyInvalid } });
      }
    },
  );

  it('another Authorization scheme is an unrecognized credential', async () => {
    const reply = await call(sim, 'GET', '/models', { key: null, headers: { authorization: 'Basic Zm9vOmJhcg==' } });
    expect(reply).toMatchObject({ status: 401, body: { detail: AuthDetail.ApiKeyInvalid } });
  });

  it('a revoked key stops working at once; the account’s other key still works; nothing is charged', async () => {
    const { sim: local } = await startTestSim();
    try {
      expect((await call(local, 'GET', '/models', { key: SECOND_KEY })).status).toBe(200);
      local.revokeKey('key_second');
      const models = await call(local, 'GET', '/models', { key: SECOND_KEY });
      expect(models).toMatchObject({ status: 401, body: { detail: AuthDetail.ApiKeyInvalid } });
      const post = await submit(local, { prompt: PROMPT, model: 'flux-dev' }, { key: SECOND_KEY });
      expect(post).toMatchObject({ status: 401, body: { detail: AuthDetail.ApiKeyInvalid } });
      expect((await call(local, 'GET', '/models')).status).toBe(200);
      expect(local.charges.entries()).toEqual([]);
      expectChargesConsistent(local);
    } finally {
      await local.close();
    }
  });

  it('a disabled account: 403 account_disabled for a valid key, over HTTP control too', async () => {
    const { sim: local } = await startTestSim();
    try {
      local.setAccountDisabled('acct_other', true);
      const reply = await call(local, 'GET', '/models', { key: OTHER_ACCOUNT_KEY, via: 'x-api-key' });
      expect(reply).toMatchObject({ status: 403, body: { detail: AuthDetail.AccountDisabled } });
      const post = await submit(local, { prompt: PROMPT, model: 'sdxl' }, { key: OTHER_ACCOUNT_KEY });
      expect(post).toMatchObject({ status: 403, body: { detail: AuthDetail.AccountDisabled } });
      const control = await call(local, 'POST', `http://127.0.0.1:${local.port}/_sim/control`, {
        key: null,
        json: { op: 'setAccountDisabled', accountId: 'acct_other', disabled: false },
      });
      expect(control.status).toBe(200);
      expect((await call(local, 'GET', '/models', { key: OTHER_ACCOUNT_KEY })).status).toBe(200);
      expect(local.charges.entries()).toEqual([]);
    } finally {
      await local.close();
    }
  });

  it('models are per account', async () => {
    const reply = await call(sim, 'GET', '/models', { key: OTHER_ACCOUNT_KEY });
    expect(reply.body).toEqual({ data: [{ id: 'sdxl', name: 'Stable Diffusion XL', price_usd: 0.02 }] });
  });
});
