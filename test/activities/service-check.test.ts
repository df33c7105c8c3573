import { afterEach, describe, expect, it } from 'vitest';
import { ServiceProblem } from '../../src/model';
import { startStub, type StubReply, type StubServer } from '../api/helpers/stub-server';
import { closedPort } from '../helpers/closed-port';
import { activitiesFor, runActivity } from './helpers';

/** `checkService`, the free checks `run` asks a worker for before a batch starts: only what blocks every request stops. */
let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function check(baseUrl: string) {
  const { activities } = activitiesFor(baseUrl);
  const r = await runActivity(() => activities.checkService());
  if (!r.value) throw new Error(`checkService failed: ${r.failure?.message}`);
  return r.value;
}

const on = async (reply: StubReply) => {
  stub = await startStub(() => reply);
  return stub.url;
};

describe('checkService', () => {
  it('nothing listening at the base URL: unreachable, naming IMAGEGEN_BASE_URL', async () => {
    const out = await check(`http://127.0.0.1:${await closedPort()}/api/public/v1`);
    expect(out).toMatchObject({ ok: false, problem: ServiceProblem.Unreachable });
    expect(!out.ok && out.message).toMatch(/cannot be reached.*ECONNREFUSED.*IMAGEGEN_BASE_URL.*nothing was sent/);
  });

  it('a refused key (401): key_refused, naming the key settings', async () => {
    const out = await check(await on({ status: 401, body: { detail: 'api_key_invalid' } }));
    expect(out).toMatchObject({ ok: false, problem: ServiceProblem.KeyRefused });
    expect(!out.ok && out.message).toMatch(/refused the worker's key.*IMAGEGEN_API_KEY \/ IMAGEGEN_API_KEY_FILE/);
  });

  it('a catalog the service does not have (404) or a 500 blocks nothing; a catalog is passed on', async () => {
    expect(await check(await on({ status: 404, body: 'no such page' }))).toEqual({ ok: true });
    await stub?.close();
    expect(await check(await on({ status: 500, body: 'oops' }))).toEqual({ ok: true });
    await stub?.close();
    expect(await check(await on({ status: 200, body: { data: [{ id: 'flux-dev', price_usd: 0.04 }] } }))).toEqual({
      ok: true,
      models: [expect.objectContaining({ id: 'flux-dev' }) as unknown],
    });
  });
});
