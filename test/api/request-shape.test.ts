import { describe, expect, it } from 'vitest';
import { requestBody } from '../../src/api/client';
import { RequestShapeError } from '../../src/api/request-shape';
import { ConfigError, loadServiceConfig } from '../../src/config/service-config';
import { validateCreationBody } from '../../src/simulator/validation';

const shapeOf = (env: Record<string, string>) => loadServiceConfig(env);
const configError = (env: Record<string, string>): ConfigError => {
  try {
    loadServiceConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
};

const REQUEST = {
  prompt: 'a lighthouse at dusk',
  model: 'sdxl',
  negative_prompt: 'blur',
  width: 512,
  height: 768,
  seed: 7,
  num_images: 2,
};

describe('IMAGEGEN_REQUEST_FIELDS and IMAGEGEN_REQUEST_TEMPLATE', () => {
  it('default to the documented flat body, byte for byte as before', () => {
    const body = JSON.stringify(requestBody(REQUEST, shapeOf({})));
    expect(body).toBe(
      '{"prompt":"a lighthouse at dusk","model":"sdxl","negative_prompt":"blur","width":512,"height":768,"seed":7,"num_images":2}',
    );
    expect(JSON.stringify(requestBody({ prompt: 'p', model: 'm' }))).toBe('{"prompt":"p","model":"m"}');
  });

  it('rename fields, make nested objects, and merge the template after them', () => {
    const config = shapeOf({
      IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text, num_images=n ,negative_prompt=input.negative',
      IMAGEGEN_REQUEST_TEMPLATE: '{"input":{"lang":"en"},"output_format":"png","flags":[1,2]}',
    });
    expect(config.requestFields.prompt).toBe('input.text');
    expect(config.requestFields.model).toBe('model');
    expect(JSON.stringify(requestBody(REQUEST, config))).toBe(
      '{"input":{"text":"a lighthouse at dusk","negative":"blur","lang":"en"},"model":"sdxl","width":512,' +
        '"height":768,"seed":7,"n":2,"output_format":"png","flags":[1,2]}',
    );
  });

  it('give the same bytes for the same request, whatever order its extra fields were made in', () => {
    const config = shapeOf({ IMAGEGEN_REQUEST_TEMPLATE: '{"style":"plain","meta":{"source":"imagebatch"}}' });
    const a = requestBody({ ...REQUEST, extra: { 'meta.sku': 'A-1', style: 'photo' } }, config);
    const b = requestBody({ ...REQUEST, extra: { style: 'photo', 'meta.sku': 'A-1' } }, config);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    // A row's value wins over the template's; the template is never changed by it.
    expect(a).toMatchObject({ style: 'photo', meta: { source: 'imagebatch', sku: 'A-1' } });
    expect(requestBody(REQUEST, config)).toMatchObject({ style: 'plain', meta: { source: 'imagebatch' } });
    expect(config.requestTemplate).toEqual({ style: 'plain', meta: { source: 'imagebatch' } });
  });

  it('refuse a row field where a request field goes (nothing is sent)', () => {
    const config = shapeOf({ IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text' });
    expect(() => requestBody({ ...REQUEST, extra: { input: 'x' } }, config)).toThrow(RequestShapeError);
    expect(() => requestBody({ ...REQUEST, extra: { 'input.text': 'x' } }, config)).toThrow(/where prompt goes/);
    expect(() => requestBody({ ...REQUEST, extra: { seed: '1' } }, config)).toThrow(/where seed goes/);
  });

  it.each([
    [{ IMAGEGEN_REQUEST_FIELDS: 'promt=text' }, 'IMAGEGEN_REQUEST_FIELDS', /"promt" is not a request field/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt=text,negative_prompt=text' }, 'IMAGEGEN_REQUEST_FIELDS', /duplicate target/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt=model' }, 'IMAGEGEN_REQUEST_FIELDS', /prompt and model .*duplicate/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt=input,seed=input.seed' }, 'IMAGEGEN_REQUEST_FIELDS', /inside the other/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt' }, 'IMAGEGEN_REQUEST_FIELDS', /<field>=<target>/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt=a..b' }, 'IMAGEGEN_REQUEST_FIELDS', /dotted path/],
    [{ IMAGEGEN_REQUEST_FIELDS: 'prompt=__proto__.x' }, 'IMAGEGEN_REQUEST_FIELDS', /reserved/],
    [{ IMAGEGEN_REQUEST_TEMPLATE: '{"a":' }, 'IMAGEGEN_REQUEST_TEMPLATE', /not valid JSON/],
    [{ IMAGEGEN_REQUEST_TEMPLATE: '[1,2]' }, 'IMAGEGEN_REQUEST_TEMPLATE', /must be a JSON object/],
    [{ IMAGEGEN_REQUEST_TEMPLATE: `{"a":"${'x'.repeat(9000)}"}` }, 'IMAGEGEN_REQUEST_TEMPLATE', /at most 8192/],
    [{ IMAGEGEN_REQUEST_TEMPLATE: '{"a":{"__proto__":{"x":1}}}' }, 'IMAGEGEN_REQUEST_TEMPLATE', /reserved key/],
    [{ IMAGEGEN_REQUEST_TEMPLATE: '{"seed":1}' }, 'IMAGEGEN_REQUEST_TEMPLATE', /sets "seed", where seed goes/],
    [
      { IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text', IMAGEGEN_REQUEST_TEMPLATE: '{"input":"x"}' },
      'IMAGEGEN_REQUEST_TEMPLATE',
      /sets "input" to a value, but prompt goes to "input.text"/,
    ],
    [
      { IMAGEGEN_REQUEST_FIELDS: 'prompt=input.text', IMAGEGEN_REQUEST_TEMPLATE: '{"input":{"text":"x"}}' },
      'IMAGEGEN_REQUEST_TEMPLATE',
      /sets "input.text", where prompt goes/,
    ],
  ])('refuse case %#, naming the variable', (env, variable, problem) => {
    const err = configError(env);
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(problem);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
  });
});

describe("the simulator's requestLayout switch", () => {
  const layout = { fields: { prompt: 'input.text', num_images: 'n' }, extraFields: { style: 'required' as const } };

  it('accepts a renamed, nested body with its extra fields, and reads the fields from where they are', () => {
    const res = validateCreationBody({ input: { text: ' a fox ' }, model: 'sdxl', n: 3, style: 'photo' }, layout);
    expect(res).toMatchObject({ ok: true, value: { prompt: 'a fox', model: 'sdxl', numImages: 3 } });
  });

  it('rejects unknown fields by path, a missing required extra field, and names moved fields by their path', () => {
    const res = validateCreationBody({ input: { text: '', other: 1 }, prompt: 'x', model: 'sdxl', n: 9 }, layout);
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.errors).toEqual(
      expect.arrayContaining([
        { field: 'input.other', message: 'is not a known field' },
        { field: 'prompt', message: 'is not a known field' },
        { field: 'style', message: 'is required' },
        { field: 'input.text', message: 'must not be empty' },
        { field: 'n', message: 'must be between 1 and 4' },
      ]),
    );
  });

  it('keeps rejecting unknown fields without the switch', () => {
    expect(validateCreationBody({ prompt: 'a fox', model: 'sdxl', style: 'x' })).toEqual({
      ok: false,
      errors: [{ field: 'style', message: 'is not a known field' }],
    });
  });
});
