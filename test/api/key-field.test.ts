import { afterEach, describe, expect, it } from 'vitest';
import { ImageApiClient, requestBody } from '../../src/api/client';
import { describeKeyCarrier } from '../../src/api/key-carrier';
import { buildRequestBody, RequestShapeError } from '../../src/api/request-shape';
import { requestFingerprinter } from '../../src/activities/key-ledger';
import { settingsFingerprint } from '../../src/activities/service-proof';
import { ConfigError, loadServiceConfig } from '../../src/config/service-config';
import { requestPrint } from '../../src/ledger';
import { SECRET_KEY, startStub, type StubServer } from './helpers/stub-server';

/**
 * `IMAGEGEN_IDEMPOTENCY_FIELD`: the idempotency key in a body field instead of a header (the interface: "a header or
 * field"). One of the two; a field no other setting or column uses; placed last in the body, so that a retry of the
 * key sends the same bytes; and left out of the request's fingerprint, which stays its content.
 */
const REQUEST = { prompt: 'a lighthouse at dusk', model: 'sdxl', seed: 7 };
const FIELD = { IMAGEGEN_IDEMPOTENCY_FIELD: 'metadata.idempotency_key' };

const configError = (env: Record<string, string>): ConfigError => {
  try {
    loadServiceConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
};

describe('the key carrier setting', () => {
  it('is the header by default, the field when one is set; an empty variable is unset', () => {
    expect(describeKeyCarrier(loadServiceConfig({}))).toBe('header Idempotency-Key');
    expect(describeKeyCarrier(loadServiceConfig(FIELD))).toBe('body field metadata.idempotency_key');
    const emptyHeader = loadServiceConfig({ ...FIELD, IMAGEGEN_IDEMPOTENCY_HEADER: ' ' });
    expect(describeKeyCarrier(emptyHeader)).toBe('body field metadata.idempotency_key');
    expect(loadServiceConfig({ IMAGEGEN_IDEMPOTENCY_FIELD: '' }).idempotencyField).toBeUndefined();
  });

  it('refuses a header and a field both set, naming both', () => {
    const err = configError({ ...FIELD, IMAGEGEN_IDEMPOTENCY_HEADER: 'Idempotency-Key' });
    expect(err.variable).toBe('IMAGEGEN_IDEMPOTENCY_FIELD');
    expect(err.message).toBe(
      'IMAGEGEN_IDEMPOTENCY_FIELD: cannot go with IMAGEGEN_IDEMPOTENCY_HEADER: the key travels in a header or a ' +
        'body field, not both; unset one of them',
    );
  });

  it.each([
    [{ IMAGEGEN_IDEMPOTENCY_FIELD: 'seed' }, /"seed" is where seed goes \(IMAGEGEN_REQUEST_FIELDS\)/],
    [
      { IMAGEGEN_IDEMPOTENCY_FIELD: 'input', IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text' },
      /"input" and "input.text", where prompt goes, are one inside the other/,
    ],
    [{ IMAGEGEN_IDEMPOTENCY_FIELD: 'prompt.key' }, /"prompt.key" and "prompt", where prompt goes/],
    [
      { ...FIELD, IMAGEGEN_REQUEST_TEMPLATE: '{"metadata":{"idempotency_key":"x"}}' },
      /IMAGEGEN_REQUEST_TEMPLATE sets "metadata.idempotency_key", where the idempotency key goes/,
    ],
    [
      { ...FIELD, IMAGEGEN_REQUEST_TEMPLATE: '{"metadata":"x"}' },
      /IMAGEGEN_REQUEST_TEMPLATE sets "metadata" to a value, but the idempotency key goes to "metadata.idempotency_key"/,
    ],
    [
      { IMAGEGEN_IDEMPOTENCY_FIELD: 'metadata', IMAGEGEN_REQUEST_TEMPLATE: '{"metadata":{"source":"x"}}' },
      /IMAGEGEN_REQUEST_TEMPLATE sets "metadata", where the idempotency key goes/,
    ],
  ])('refuses a field another setting uses, at start (case %#)', (env, problem) => {
    const err = configError(env);
    expect(err.variable).toBe('IMAGEGEN_IDEMPOTENCY_FIELD');
    expect(err.message).toMatch(problem);
  });
});

describe('the body with its key', () => {
  const config = loadServiceConfig({ ...FIELD, IMAGEGEN_REQUEST_TEMPLATE: '{"metadata":{"source":"imagebatch"}}' });

  it('puts the key last, inside the objects the body already has; without the key, the body is the header mode one', () => {
    const row = { ...REQUEST, extra: { style: 'photo' } };
    expect(JSON.stringify(buildRequestBody(row, config, 'k-1'))).toBe(
      '{"prompt":"a lighthouse at dusk","model":"sdxl","seed":7,"metadata":{"source":"imagebatch",' +
        '"idempotency_key":"k-1"},"style":"photo"}',
    );
    const header = loadServiceConfig({ IMAGEGEN_REQUEST_TEMPLATE: '{"metadata":{"source":"imagebatch"}}' });
    expect(JSON.stringify(requestBody(row, config))).toBe(JSON.stringify(requestBody(row, header)));
    // Header mode never puts the key in the body.
    expect(JSON.stringify(buildRequestBody(row, header, 'k-1'))).toBe(JSON.stringify(requestBody(row, header)));
  });

  it('refuses a row field where the key goes, inside it or holding it: nothing is sent', () => {
    for (const field of ['metadata.idempotency_key', 'metadata.idempotency_key.x', 'metadata']) {
      const row = { ...REQUEST, extra: { [field]: 'x' } };
      expect(() => buildRequestBody(row, config, 'k-1'), field).toThrow(RequestShapeError);
      expect(() => requestBody(row, config), field).toThrow(
        `a --column field goes to "${field}", where the idempotency key goes ("metadata.idempotency_key", ` +
          'IMAGEGEN_IDEMPOTENCY_FIELD): send it under another field',
      );
    }
    expect(buildRequestBody({ ...REQUEST, extra: { 'metadata.sku': 'A-1' } }, config, 'k')).toMatchObject({
      metadata: { source: 'imagebatch', sku: 'A-1', idempotency_key: 'k' },
    });
  });
});

describe('the print of a request', () => {
  it('is its content: the same fingerprint with the key in the body as in the header, and in header mode as before', () => {
    const base = 'http://127.0.0.1:9/api/public/v1';
    const header = requestFingerprinter(loadServiceConfig({ IMAGEGEN_BASE_URL: base }))(REQUEST);
    expect(header).toEqual(
      requestPrint(`${base}/creations`, '{"prompt":"a lighthouse at dusk","model":"sdxl","seed":7}'),
    );
    const field = requestFingerprinter(loadServiceConfig({ IMAGEGEN_BASE_URL: base, ...FIELD }))(REQUEST);
    expect(field.fingerprint).toBe(header.fingerprint);
    // What a key sent holds where it traveled: sent again elsewhere, the service would judge it as new.
    expect(field.requestSha256).not.toBe(header.requestSha256);
  });
});

describe('the proof of settings', () => {
  it('covers the field; unset, it is left out, so proofs made before the setting existed still hold', () => {
    const header = loadServiceConfig({});
    const { idempotencyField: _unset, ...before } = header;
    expect(settingsFingerprint(before as typeof header)).toBe(settingsFingerprint(header));
    const field = settingsFingerprint(loadServiceConfig(FIELD));
    expect(field).not.toBe(settingsFingerprint(header));
    expect(field).not.toBe(settingsFingerprint(loadServiceConfig({ IMAGEGEN_IDEMPOTENCY_FIELD: 'idempotency_key' })));
  });
});

describe('the client, on the wire', () => {
  let stub: StubServer | undefined;
  let client: ImageApiClient | undefined;
  afterEach(async () => {
    await client?.close();
    await stub?.close();
  });

  it('sends the key in the body and no idempotency header; a retry after a reset sends the same bytes', async () => {
    stub = await startStub((_r, i) => (i === 0 ? { reset: true } : { status: 202, body: { id: 'cr_1' } }));
    client = new ImageApiClient({
      config: loadServiceConfig({ ...FIELD, IMAGEGEN_BASE_URL: stub.url }),
      apiKey: () => SECRET_KEY,
    });
    const input = { idempotencyKey: 'ib/b1/r7/a1', request: REQUEST };
    expect(await client.submit(input)).toMatchObject({ kind: 'ambiguous' });
    expect(await client.submit(input)).toMatchObject({ kind: 'accepted', creationId: 'cr_1' });
    const [first, second] = stub.requests;
    expect(first?.body).toBe(
      '{"prompt":"a lighthouse at dusk","model":"sdxl","seed":7,"metadata":{"idempotency_key":"ib/b1/r7/a1"}}',
    );
    expect(second?.body).toBe(first?.body);
    expect(stub.requests.map((r) => r.headers['idempotency-key'])).toEqual([undefined, undefined]);
    expect(first?.headers['content-type']).toBe('application/json');
  });
});
