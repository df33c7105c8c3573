import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ERROR_FIELDS,
  DEFAULT_ID_FIELDS,
  DEFAULT_IMAGE_FIELDS,
  DEFAULT_MODEL_ID_FIELDS,
  DEFAULT_STATUS_FIELDS,
} from '../../src/api/schemas';
import { ConfigError, loadServiceConfig, SERVICE_CONFIG_ENV } from '../../src/config/service-config';

/** IMAGEGEN_ID_FIELDS, _STATUS_FIELDS, _ERROR_FIELDS, _IMAGE_FIELDS, _MODEL_ID_FIELDS: where records are read. */

const SETTINGS = [
  ['idFields', 'IMAGEGEN_ID_FIELDS', DEFAULT_ID_FIELDS],
  ['statusFields', 'IMAGEGEN_STATUS_FIELDS', DEFAULT_STATUS_FIELDS],
  ['errorFields', 'IMAGEGEN_ERROR_FIELDS', DEFAULT_ERROR_FIELDS],
  ['imageFields', 'IMAGEGEN_IMAGE_FIELDS', DEFAULT_IMAGE_FIELDS],
  ['modelIdFields', 'IMAGEGEN_MODEL_ID_FIELDS', DEFAULT_MODEL_ID_FIELDS],
] as const;

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadServiceConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('record field settings', () => {
  it('have their defaults, images[].url first', () => {
    const c = loadServiceConfig({});
    for (const [field, variable, fallback] of SETTINGS) {
      expect(c[field], field).toEqual(fallback);
      expect(SERVICE_CONFIG_ENV[field]).toBe(variable);
    }
    expect(DEFAULT_IMAGE_FIELDS[0]).toBe('images[].url');
    expect(DEFAULT_IMAGE_FIELDS).toEqual(expect.arrayContaining(['data[].url', 'output[]', 'images[]']));
    expect([DEFAULT_ID_FIELDS, DEFAULT_STATUS_FIELDS, DEFAULT_ERROR_FIELDS, DEFAULT_MODEL_ID_FIELDS]).toEqual([
      ['id'],
      ['status'],
      ['error'],
      ['id'],
    ]);
  });

  it.each(SETTINGS)('%s: a comma-separated list of paths, trimmed, in order', (field, variable) => {
    const c = loadServiceConfig({ [variable]: ' job.uuid , items[0].x ,data[].url,, ' });
    expect(c[field]).toEqual(['job.uuid', 'items[0].x', 'data[].url']);
  });

  it.each(
    SETTINGS.flatMap(([, variable]) => [
      [variable, 'state id', 'must be a field name or a dotted path'],
      [variable, 'a..b', 'empty field name'],
      [variable, 'images[x].url', '[n] for element n'],
      [variable, 'ok, [0].url', 'not a name followed by [n] or []'],
      [variable, ' , ', 'must list at least one field'],
    ]),
  )('%s=%j is a ConfigError naming the variable', (variable, value, problem) => {
    const err = errorOf({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
    expect(err.message).toContain(problem);
  });

  it('the cost and price fields take the same grammar', () => {
    expect(loadServiceConfig({ IMAGEGEN_COST_FIELDS: 'charges[0].usd' }).costFields).toEqual(['charges[0].usd']);
    expect(errorOf({ IMAGEGEN_PRICE_FIELDS: 'pricing[' }).variable).toBe('IMAGEGEN_PRICE_FIELDS');
  });

  it('a value that looks like a secret is not shown in the error', () => {
    const secret = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc sk';
    const err = errorOf({ IMAGEGEN_IMAGE_FIELDS: secret });
    expect(err.message).not.toContain('4eC39HqLyjWDarjtT1zdp7dc');
  });
});
