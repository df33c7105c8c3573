import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/service-config';
import { connectionOptions, loadTemporalConfig } from '../../src/config/temporal-config';
import { defaultConfigFile } from '../../src/config/temporal-profile';

const dir = mkdtempSync(path.join(os.tmpdir(), 'imagebatch-temporal-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** Writes a file into the test's temp folder and returns its path. */
function file(text: string, name = `f${++files}.toml`): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** The TLS options of the connection; false when TLS is off, true for TLS with the system's roots and nothing else. */
function tlsOf(env: Record<string, string>): TLSConfig | boolean | null | undefined {
  return connectionOptions(loadTemporalConfig(env)).tls;
}

/** The TLS options of a connection that has some (mTLS, a server CA or name). */
function tlsConfigOf(env: Record<string, string>): TLSConfig {
  const tls = tlsOf(env);
  if (typeof tls !== 'object' || tls === null) throw new Error(`expected TLS options, got ${String(tls)}`);
  return tls;
}

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadTemporalConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

const CLOUD_KEY = 'eyJhbGciOiJFUzI1NiJ9.cloud-key-secret.sig';
const PROFILES = file(
  [
    '[profile.default]',
    'address = "default-host:7233"',
    'namespace = "from-default"',
    '',
    '[profile.cloud]',
    'address = "my-ns.a1b2c.tmprl.cloud:7233"',
    'namespace = "my-ns.a1b2c"',
    `api_key = "${CLOUD_KEY}"`,
    '',
    '[profile.cloud.grpc_meta]',
    'tenant_id = "t-1"',
    '',
    '[profile.plain]',
    'address = "plain-host:7233"',
    'api_key = "k"',
    '[profile.plain.tls]',
    'disabled = true',
    '',
  ].join('\n'),
);

describe('loadTemporalConfig without a profile', () => {
  it('has the documented defaults (no config file, no variables)', () => {
    expect(loadTemporalConfig({})).toEqual({
      address: '127.0.0.1:7233',
      namespace: 'default',
      taskQueue: 'imagebatch',
      ratePerSecond: 0,
      maxConcurrentActivities: 100,
      shutdownGraceMs: 8_000,
    });
    expect(connectionOptions(loadTemporalConfig({}))).toEqual({ address: '127.0.0.1:7233' });
  });

  it('IMAGEBATCH_SHUTDOWN_GRACE is a duration with its unit; 0s cancels the activities at once', () => {
    const grace = (value: string) => loadTemporalConfig({ IMAGEBATCH_SHUTDOWN_GRACE: value }).shutdownGraceMs;
    expect(grace('50s')).toBe(50_000);
    expect(grace(' 2m ')).toBe(120_000);
    expect(grace('1500ms')).toBe(1_500);
    expect(grace('0s')).toBe(0);
    expect(grace('1h')).toBe(3_600_000);
  });

  it('IMAGEBATCH_MAX_CACHED_WORKFLOWS is 0 (no cache) or at least 2', () => {
    const cache = (value: string) => loadTemporalConfig({ IMAGEBATCH_MAX_CACHED_WORKFLOWS: value }).maxCachedWorkflows;
    expect(cache('500')).toBe(500);
    expect(cache(' 0 ')).toBe(0);
    for (const wrong of ['1', '2.5', '-3', 'many', '100001']) {
      expect(() => cache(wrong)).toThrow(/IMAGEBATCH_MAX_CACHED_WORKFLOWS/);
    }
  });

  it('TEMPORAL_API_KEY implies TLS, and TEMPORAL_TLS=false turns it off again', () => {
    const withKey = loadTemporalConfig({ TEMPORAL_ADDRESS: 'x.tmprl.cloud:7233', TEMPORAL_API_KEY: CLOUD_KEY });
    expect(connectionOptions(withKey)).toEqual({ address: 'x.tmprl.cloud:7233', tls: true, apiKey: CLOUD_KEY });
    expect(tlsOf({ TEMPORAL_API_KEY: CLOUD_KEY, TEMPORAL_TLS: 'false' })).toBe(false);
    expect(tlsOf({ TEMPORAL_TLS: 'true' })).toEqual({});
  });

  it('TEMPORAL_TLS=yes or TRUE keeps TLS on (envconfig alone would read any value but 1 and true as off)', () => {
    expect(tlsOf({ TEMPORAL_API_KEY: CLOUD_KEY, TEMPORAL_TLS: 'yes' })).toEqual({});
    expect(tlsOf({ TEMPORAL_API_KEY: CLOUD_KEY, TEMPORAL_TLS: 'TRUE' })).toEqual({});
    expect(tlsOf({ TEMPORAL_TLS: 'no' })).toBe(false);
  });

  it('mTLS from files: the connection options carry the bytes of each file', () => {
    const crt = file('-----CERT-----\n', 'client.pem');
    const key = file('-----KEY-----\n', 'client.key');
    const ca = file('-----CA-----\n', 'ca.pem');
    const config = loadTemporalConfig({
      TEMPORAL_TLS_CLIENT_CERT_PATH: crt,
      TEMPORAL_TLS_CLIENT_KEY_PATH: key,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    });
    const tls = connectionOptions(config).tls as TLSConfig;
    expect(Buffer.from(tls.clientCertPair!.crt).toString()).toBe('-----CERT-----\n');
    expect(Buffer.from(tls.clientCertPair!.key).toString()).toBe('-----KEY-----\n');
    expect(Buffer.from(tls.serverRootCACertificate!).toString()).toBe('-----CA-----\n');
    expect(tls.serverNameOverride).toBe('temporal.internal');
  });

  it('mTLS from PEM data in the environment', () => {
    const pair = tlsConfigOf({
      TEMPORAL_TLS_CLIENT_CERT_DATA: 'CERT-PEM',
      TEMPORAL_TLS_CLIENT_KEY_DATA: 'KEY-PEM',
    }).clientCertPair!;
    expect([Buffer.from(pair.crt).toString(), Buffer.from(pair.key).toString()]).toEqual(['CERT-PEM', 'KEY-PEM']);
  });

  it('gRPC headers from TEMPORAL_GRPC_META_<NAME>, every _ of the name a -', () => {
    const config = loadTemporalConfig({ TEMPORAL_GRPC_META_X_TENANT_ID: 't-9', TEMPORAL_GRPC_META_X_A_B_C: 'v' });
    expect(connectionOptions(config).metadata).toEqual({ 'x-tenant-id': 't-9', 'x-a-b-c': 'v' });
  });
});

describe('loadTemporalConfig with a profile', () => {
  it('reads the profile named by TEMPORAL_PROFILE from TEMPORAL_CONFIG_FILE; an API key there implies TLS', () => {
    const config = loadTemporalConfig({ TEMPORAL_CONFIG_FILE: PROFILES, TEMPORAL_PROFILE: 'cloud' });
    expect(config).toMatchObject({ address: 'my-ns.a1b2c.tmprl.cloud:7233', namespace: 'my-ns.a1b2c' });
    expect(connectionOptions(config)).toEqual({
      address: 'my-ns.a1b2c.tmprl.cloud:7233',
      tls: true,
      apiKey: CLOUD_KEY,
      metadata: { 'tenant-id': 't-1' },
    });
  });

  it('uses the default profile when TEMPORAL_PROFILE is unset', () => {
    const config = loadTemporalConfig({ TEMPORAL_CONFIG_FILE: PROFILES });
    expect(config).toMatchObject({ address: 'default-host:7233', namespace: 'from-default' });
    expect(connectionOptions(config).tls).toBeUndefined();
  });

  it('each environment variable overrides its field of the profile, the others stay', () => {
    const env = { TEMPORAL_CONFIG_FILE: PROFILES, TEMPORAL_PROFILE: 'cloud' };
    const config = loadTemporalConfig({ ...env, TEMPORAL_NAMESPACE: 'other-ns', TEMPORAL_API_KEY: 'env-key' });
    expect(config).toMatchObject({ address: 'my-ns.a1b2c.tmprl.cloud:7233', namespace: 'other-ns' });
    expect(config.apiKey).toBe('env-key');
    expect(tlsOf({ ...env, TEMPORAL_TLS: 'false' })).toBe(false);
    // An empty value removes the profile's header (its name in the file is tenant_id).
    expect(loadTemporalConfig({ ...env, TEMPORAL_GRPC_META_TENANT_ID: '' }).grpcMeta).toBeUndefined();
  });

  it("a blank variable counts as unset (an override file cannot remove one): the profile's value applies", () => {
    const env = { TEMPORAL_CONFIG_FILE: PROFILES, TEMPORAL_PROFILE: 'cloud' };
    expect(loadTemporalConfig({ ...env, TEMPORAL_ADDRESS: '', TEMPORAL_NAMESPACE: ' ' })).toMatchObject({
      address: 'my-ns.a1b2c.tmprl.cloud:7233',
      namespace: 'my-ns.a1b2c',
    });
    expect(loadTemporalConfig({ ...env, TEMPORAL_API_KEY: '' }).apiKey).toBe(loadTemporalConfig(env).apiKey);
    expect(tlsOf({ ...env, TEMPORAL_TLS: '' })).toEqual(tlsOf(env));
  });

  it("the profile's tls.disabled beats its API key; TEMPORAL_TLS beats the profile", () => {
    const env = { TEMPORAL_CONFIG_FILE: PROFILES, TEMPORAL_PROFILE: 'plain' };
    expect(loadTemporalConfig(env)).toMatchObject({ address: 'plain-host:7233', apiKey: 'k' });
    expect(tlsOf(env)).toBe(false);
    expect(tlsOf({ ...env, TEMPORAL_TLS: 'true' })).toEqual({});
  });

  it('mTLS paths in the profile, with the server CA from the environment', () => {
    const crt = file('P-CERT', 'p-client.pem');
    const key = file('P-KEY', 'p-client.key');
    const toml = file(
      `[profile.mtls]\naddress = "ns.acct.tmprl.cloud:7233"\n[profile.mtls.tls]\n` +
        `client_cert_path = ${JSON.stringify(crt)}\nclient_key_path = ${JSON.stringify(key)}\nserver_name = "n"\n`,
    );
    const config = loadTemporalConfig({
      TEMPORAL_CONFIG_FILE: toml,
      TEMPORAL_PROFILE: 'mtls',
      TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'ENV-CA',
    });
    expect(config.tls).toEqual({
      clientCert: { path: crt },
      clientKey: { path: key },
      serverCACert: { data: new TextEncoder().encode('ENV-CA') },
      serverName: 'n',
    });
    const tls = connectionOptions(config).tls as TLSConfig;
    expect(Buffer.from(tls.clientCertPair!.crt).toString()).toBe('P-CERT');
    expect(Buffer.from(tls.serverRootCACertificate!).toString()).toBe('ENV-CA');
  });

  it('finds temporal.toml at the standard location (XDG_CONFIG_HOME, else ~/.config)', () => {
    const xdg = path.join(dir, 'xdg');
    mkdirSync(path.join(xdg, 'temporalio'), { recursive: true });
    writeFileSync(path.join(xdg, 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "xdg-host:7233"\n');
    expect(defaultConfigFile({ XDG_CONFIG_HOME: xdg }, 'linux')).toBe(path.join(xdg, 'temporalio', 'temporal.toml'));
    expect(loadTemporalConfig({ XDG_CONFIG_HOME: xdg }).address).toBe('xdg-host:7233');
    expect(defaultConfigFile({ HOME: '/home/u' }, 'linux')).toBe('/home/u/.config/temporalio/temporal.toml');
    expect(defaultConfigFile({ HOME: '/Users/u' }, 'darwin')).toBe(
      '/Users/u/Library/Application Support/temporalio/temporal.toml',
    );
    // No file at the standard location is not an error: the defaults apply.
    expect(loadTemporalConfig({ HOME: path.join(dir, 'no-such-home') }).address).toBe('127.0.0.1:7233');
  });
});

describe('loadTemporalConfig errors name the variable or the file, never a key', () => {
  it.each([
    [
      { TEMPORAL_CONFIG_FILE: '/no/such/temporal.toml' },
      'TEMPORAL_CONFIG_FILE',
      'cannot read the file it names (ENOENT)',
    ],
    [{ TEMPORAL_PROFILE: 'cloud', HOME: '/no/such/home' }, 'TEMPORAL_PROFILE', 'no config file'],
    [
      { TEMPORAL_CONFIG_FILE: PROFILES, TEMPORAL_PROFILE: 'prod' },
      'TEMPORAL_PROFILE',
      'profiles: default, cloud, plain',
    ],
    [{ TEMPORAL_ADDRESS: 'http://x:7233' }, 'TEMPORAL_ADDRESS', 'must be host:port'],
    [{ TEMPORAL_TLS: 'maybe' }, 'TEMPORAL_TLS', 'maybe'],
    [{ TEMPORAL_TLS_CLIENT_CERT_PATH: PROFILES }, 'TEMPORAL_TLS_CLIENT_KEY_PATH', 'needs both'],
    [{ TEMPORAL_TLS_CLIENT_KEY_DATA: 'K' }, 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'needs both'],
    [
      { TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/no/ca.pem' },
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'cannot read the file it names (ENOENT)',
    ],
    [
      { TEMPORAL_TLS_SERVER_CA_CERT_PATH: PROFILES, TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'X' },
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'set only one of',
    ],
    [{ TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' }, 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION', 'SERVER_NAME'],
    [{ IMAGEBATCH_RATE_LIMIT: 'fast' }, 'IMAGEBATCH_RATE_LIMIT', 'must be a number'],
    [{ IMAGEBATCH_SHUTDOWN_GRACE: '50' }, 'IMAGEBATCH_SHUTDOWN_GRACE', 'with its unit, such as 8s, 50s or 2m'],
    [{ IMAGEBATCH_SHUTDOWN_GRACE: '2h' }, 'IMAGEBATCH_SHUTDOWN_GRACE', 'at most 1h'],
    [{ IMAGEBATCH_SHUTDOWN_GRACE: '-5s' }, 'IMAGEBATCH_SHUTDOWN_GRACE', 'must be a duration'],
  ])('%j', (env, variable, problem) => {
    const err = errorOf(env);
    expect(err.variable).toBe(variable);
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain(problem);
    // A path from a variable is named, never printed (it may be a secret put in the wrong variable).
    for (const [name, value] of Object.entries(env)) {
      if (/_(PATH|FILE)$/.test(name)) expect(err.message).not.toContain(value);
    }
  });

  it("a wrong value in a profile names the file, the profile and the key; an API key's value is never shown", () => {
    const bad = file('[profile.p]\naddress = "no-port"\n');
    const err = errorOf({ TEMPORAL_CONFIG_FILE: bad, TEMPORAL_PROFILE: 'p' });
    expect(err.variable).toBe('TEMPORAL_CONFIG_FILE profile.p.address');
    expect(err.message).toContain('must be host:port');

    const numericKey = file('[profile.p]\napi_key = 1234567890\n');
    const keyErr = errorOf({ TEMPORAL_CONFIG_FILE: numericKey, TEMPORAL_PROFILE: 'p' });
    expect(keyErr.variable).toBe('TEMPORAL_CONFIG_FILE profile.p.api_key');
    expect(keyErr.message).not.toContain('1234567890');

    const missingCert = file('[profile.p]\n[profile.p.tls]\nclient_cert_path = "/no/cert.pem"\n');
    const certErr = errorOf({ TEMPORAL_CONFIG_FILE: missingCert, TEMPORAL_PROFILE: 'p' });
    expect(certErr.variable).toBe('TEMPORAL_CONFIG_FILE profile.p.tls.client_cert_path');
    expect(certErr.message).toContain('cannot read the file it names (ENOENT)');
    expect(certErr.message).not.toContain('/no/cert.pem');
    // The variable does not replace the profile's other kind of the same PEM (envconfig refuses both).
    const mixed = file(`[profile.p]\n[profile.p.tls]\nserver_ca_cert_path = ${JSON.stringify(PROFILES)}\n`);
    const mixErr = errorOf({
      TEMPORAL_CONFIG_FILE: mixed,
      TEMPORAL_PROFILE: 'p',
      TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'X',
    });
    expect(mixErr.variable).toBe('TEMPORAL_CONFIG_FILE');
    expect(mixErr.message).toContain('server_ca_cert_path and server_ca_cert_data');
  });

  it('a file that is not TOML: the reason and the line, without quoting the line (it may hold a key)', () => {
    const broken = file(`[profile.default]\napi_key = "${CLOUD_KEY}\n`);
    const err = errorOf({ TEMPORAL_CONFIG_FILE: broken });
    expect(err.variable).toBe('TEMPORAL_CONFIG_FILE');
    expect(err.message).not.toContain(broken);
    expect(err.message).toMatch(/not a valid Temporal config file: .+ \(line 2, column \d+\)/);
    expect(err.message).not.toContain('cloud-key-secret');
  });

  it('an unreadable file at the standard location is an error, a missing one is not', () => {
    // A folder in the file's place: unreadable for root too, unlike a chmod.
    const home = path.join(dir, 'home');
    mkdirSync(path.join(home, '.config', 'temporalio', 'temporal.toml'), { recursive: true });
    const err = errorOf({ HOME: home });
    expect(err.variable).toBe('TEMPORAL_CONFIG_FILE');
    expect(err.message).toContain('cannot be read (EISDIR)');
    expect(loadTemporalConfig({ HOME: path.join(dir, 'no-such-home') }).address).toBe('127.0.0.1:7233');
  });

  it('a profile file with no profiles: fine without TEMPORAL_PROFILE, an error with it', () => {
    const empty = file('# nothing yet\n');
    expect(loadTemporalConfig({ TEMPORAL_CONFIG_FILE: empty }).address).toBe('127.0.0.1:7233');
    expect(errorOf({ TEMPORAL_CONFIG_FILE: empty, TEMPORAL_PROFILE: 'x' }).message).toContain('it has no profiles');
  });
});
