import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/api/contract';
import { PREDICTION_SERVICE_PROFILE, type Simulator } from '../../src/simulator';
import { expectError, PROMPT, startTestSim, submit } from './helpers';

/**
 * Where the simulator reads the idempotency key (`idempotency.header`, `idempotency.field`): the interface says "a
 * header or field", so a service may read it from a body field, or honour none. The charge book notes the key the
 * client sent wherever it put it, so a test counts what a key that was not honoured cost.
 */
let sim: Simulator;
afterEach(async () => {
  expect(sim.unexpectedErrors()).toEqual([]);
  await sim.close();
});

const body = { prompt: PROMPT, model: 'flux-dev' };
const charges = () => sim.charges.entries().filter((e) => e.kind === 'charge').length;

describe('the key in a body field', () => {
  it('is read there: the same key and body replay the 202, charged once; the field is not a request field', async () => {
    ({ sim } = await startTestSim({ idempotency: { header: null, field: 'meta.idempotency_key' } }));
    const withKey = { ...body, meta: { idempotency_key: 'k-1' } };
    const first = await submit(sim, withKey);
    const second = await submit(sim, withKey);
    expect([first.status, second.status]).toEqual([202, 202]);
    expect(second.body.id).toBe(first.body.id);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(charges()).toBe(1);
    expect(sim.charges.chargedTwice()).toEqual([]);
  });

  it('a key sent only in the header is not read: each send is a new creation, and the book shows it twice', async () => {
    ({ sim } = await startTestSim({ idempotency: { header: null, field: 'idempotency_key' } }));
    const first = await submit(sim, body, { idempotencyKey: 'k-2' });
    const second = await submit(sim, body, { idempotencyKey: 'k-2' });
    expect([first.status, second.status]).toEqual([202, 202]);
    expect(second.body.id).not.toBe(first.body.id);
    expect(sim.charges.chargedTwice()).toEqual([
      expect.objectContaining({ idempotencyKey: 'k-2', creationIds: [first.body.id, second.body.id] }),
    ]);
  });

  it('a field that is not a string, or another body with the key: 400 naming the field', async () => {
    ({ sim } = await startTestSim({ idempotency: { header: null, field: 'idempotency_key' } }));
    const wrong = await submit(sim, { ...body, idempotency_key: 7 });
    expectError(wrong, 400, ErrorCode.InvalidRequest);
    expect(wrong.body.error.details.errors).toEqual([{ field: 'idempotency_key', message: 'must be a string' }]);
    expect((await submit(sim, { ...body, idempotency_key: 'k-3' })).status).toBe(202);
    const other = await submit(sim, { ...body, num_images: 2, idempotency_key: 'k-3' });
    expectError(other, 400, ErrorCode.InvalidRequest);
    expect(other.body.error.details.errors[0]?.field).toBe('idempotency_key');
    expect(charges()).toBe(1);
  });

  it('a service that reads no field rejects a key in the body as an unknown field', async () => {
    ({ sim } = await startTestSim());
    const reply = await submit(sim, { ...body, idempotency_key: 'k-4' });
    expectError(reply, 400, ErrorCode.InvalidRequest);
    expect(reply.body.error.details.errors).toEqual([{ field: 'idempotency_key', message: 'is not a known field' }]);
  });
});

describe('a service that honours no key', () => {
  it('judges every send as new: the same key twice is two creations, both charged', async () => {
    ({ sim } = await startTestSim({ idempotency: { header: null } }));
    const first = await submit(sim, body, { idempotencyKey: 'k-5' });
    const second = await submit(sim, body, { idempotencyKey: 'k-5' });
    expect([first.status, second.status]).toEqual([202, 202]);
    expect(second.body.id).not.toBe(first.body.id);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(charges()).toBe(2);
  });
});

describe('another header', () => {
  it('is read case-insensitively; the usual Idempotency-Key header is then not read', async () => {
    ({ sim } = await startTestSim({ idempotency: { header: 'X-Request-Id' } }));
    const a = await submit(sim, body, { headers: { 'x-request-id': 'k-6' } });
    const b = await submit(sim, body, { headers: { 'X-Request-ID': 'k-6' } });
    expect(b.body.id).toBe(a.body.id);
    const c = await submit(sim, body, { idempotencyKey: 'k-7' });
    const d = await submit(sim, body, { idempotencyKey: 'k-7' });
    expect(d.body.id).not.toBe(c.body.id);
    expect(charges()).toBe(3);
  });
});

describe('the prediction-service profile', () => {
  it('takes its own body names and reads the key only at metadata.idempotency_key', async () => {
    ({ sim } = await startTestSim(PREDICTION_SERVICE_PROFILE));
    const own = { version: 'flux-dev', input: { prompt: PROMPT, num_outputs: 1 } };
    const a = await submit(sim, { ...own, metadata: { idempotency_key: 'k-8' } });
    const b = await submit(sim, { ...own, metadata: { idempotency_key: 'k-8' } });
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(b.body.id).toBe(a.body.id);
    const c = await submit(sim, own, { idempotencyKey: 'k-9' });
    const d = await submit(sim, own, { idempotencyKey: 'k-9' });
    expect(d.body.id).not.toBe(c.body.id);
    expect(sim.charges.chargedTwice().map((s) => s.idempotencyKey)).toEqual(['k-9']);
    expectError(await submit(sim, { ...body, metadata: { idempotency_key: 'k-10' } }), 400, ErrorCode.InvalidRequest);
  });
});
