import { describe, expect, it } from 'vitest';
import { ConfigError, loadServiceConfig } from '../../src/config/service-config';

/** Issue #16, point 10: the API key never crosses the network in clear. */

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadServiceConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('plain http base URLs', () => {
  it.each([
    'http://api.example.com/api/public/v1',
    'http://simulator:8787/api/public/v1',
    'http://10.0.0.5:8787/api/public/v1',
    'http://[2001:db8::1]:8787/v1',
    'http://localhost.example.com/v1',
    'http://128.0.0.1/v1',
  ])('refuses %s, a remote host, saying why and how to allow it', (url) => {
    const err = errorOf({ IMAGEGEN_BASE_URL: url });
    expect(err.variable).toBe('IMAGEGEN_BASE_URL');
    expect(err.message).toMatch(/^IMAGEGEN_BASE_URL: /);
    expect(err.message).toMatch(/https/);
    expect(err.message).toMatch(/API key would cross the network in clear/);
    expect(err.message).toMatch(/IMAGEGEN_ALLOW_INSECURE_HTTP=1/);
  });

  it.each([
    'http://127.0.0.1:8787/api/public/v1',
    'http://127.9.8.7/v1',
    'http://localhost:8787/api/public/v1',
    'http://LOCALHOST/v1',
    'http://[::1]:8787/api/public/v1',
  ])('accepts %s, a loopback host', (url) => {
    expect(loadServiceConfig({ IMAGEGEN_BASE_URL: url }).baseUrl).toBe(new URL(url).toString().replace(/\/+$/, ''));
  });

  it('accepts the default (the simulator on loopback)', () => {
    expect(loadServiceConfig({}).baseUrl).toBe('http://127.0.0.1:8787/api/public/v1');
  });

  it.each(['1', 'true', 'yes', ' TRUE '])('accepts a remote http URL with IMAGEGEN_ALLOW_INSECURE_HTTP=%j', (allow) => {
    const c = loadServiceConfig({
      IMAGEGEN_BASE_URL: 'http://simulator:8787/api/public/v1',
      IMAGEGEN_ALLOW_INSECURE_HTTP: allow,
    });
    expect(c.baseUrl).toBe('http://simulator:8787/api/public/v1');
  });

  it.each(['0', 'false', 'no', ''])('IMAGEGEN_ALLOW_INSECURE_HTTP=%j does not allow it', (allow) => {
    const err = errorOf({ IMAGEGEN_BASE_URL: 'http://simulator:8787/v1', IMAGEGEN_ALLOW_INSECURE_HTTP: allow });
    expect(err.variable).toBe('IMAGEGEN_BASE_URL');
  });

  it('IMAGEGEN_ALLOW_INSECURE_HTTP may name the hosts it allows instead (docker-compose: simulator)', () => {
    const env = { IMAGEGEN_ALLOW_INSECURE_HTTP: 'simulator, sim2.internal' };
    const ok = ['http://simulator:8787/api/public/v1', 'http://SIM2.internal/v1'];
    for (const url of ok)
      expect(loadServiceConfig({ ...env, IMAGEGEN_BASE_URL: url }).baseUrl).toBe(url.replace('SIM2', 'sim2'));
    const err = errorOf({ ...env, IMAGEGEN_BASE_URL: 'http://api.example.com/api/public/v1' });
    expect(err.variable).toBe('IMAGEGEN_BASE_URL');
    expect(err.message).toMatch(/"api.example.com", which is not a loopback host/);
  });

  it('a wrong IMAGEGEN_ALLOW_INSECURE_HTTP is named', () => {
    const err = errorOf({ IMAGEGEN_ALLOW_INSECURE_HTTP: 'sure thing!' });
    expect(err.variable).toBe('IMAGEGEN_ALLOW_INSECURE_HTTP');
    expect(err.message).toMatch(/1 or 0/);
  });

  it.each(['https://api.example.com/api/public/v1', 'https://10.0.0.5/v1', 'https://127.0.0.1:8787/v1'])(
    'always accepts https: %s',
    (url) => {
      expect(loadServiceConfig({ IMAGEGEN_BASE_URL: url }).baseUrl).toBe(url);
      expect(loadServiceConfig({ IMAGEGEN_BASE_URL: url, IMAGEGEN_ALLOW_INSECURE_HTTP: '0' }).baseUrl).toBe(url);
    },
  );
});
