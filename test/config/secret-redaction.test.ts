import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadApiKey } from '../../src/config/api-key';
import { loadPayloadKeys } from '../../src/config/codec-config';
import { loadMetricsConfig } from '../../src/config/metrics-config';
import { describeValue, isSecretVariable, looksLikeSecret } from '../../src/config/redact';
import { loadServiceConfig } from '../../src/config/service-config';
import { loadTemporalConfig } from '../../src/config/temporal-config';

/**
 * Issue #16, point 4: a secret put in the wrong variable is never echoed. Each case calls a config loader with the
 * secret where it does not belong and checks that the message names the variable and quotes neither the secret nor
 * its 40-character token.
 */

const TOKEN = 'Wr0ngVar1ableT0kenXyZ9876543210abcdEFGHI';
const API_KEY = `img_live_${TOKEN}`;
const PAYLOAD_KEY = createHash('sha256').update('a payload key in the wrong place').digest('base64');
const PEM = `-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC${TOKEN}\n-----END PRIVATE KEY-----\n`;
const dir = mkdtempSync(path.join(os.tmpdir(), 'imagebatch-redaction-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  throw new Error('expected an error');
}

function expectHidden(message: string, variable: string, ...secrets: string[]): void {
  expect(message).toContain(variable);
  for (const s of [...secrets, TOKEN]) expect(message).not.toContain(s);
  // Not even a long piece of it.
  for (const s of secrets) expect(message).not.toContain(s.slice(0, 20));
}

describe('a secret in the wrong variable is named, never printed', () => {
  it('the API key in IMAGEGEN_API_KEY_FILE (it is not a path)', () => {
    const m = messageOf(() => loadApiKey({ IMAGEGEN_API_KEY_FILE: API_KEY }));
    expectHidden(m, 'IMAGEGEN_API_KEY_FILE', API_KEY);
    expect(m).toMatch(/cannot read the file it names \(ENOENT\)/);
    expect(m).toMatch(/looks like a key itself/);
  });

  it('the payload key in IMAGEBATCH_PAYLOAD_KEY_FILE', () => {
    const m = messageOf(() => loadPayloadKeys({ IMAGEBATCH_PAYLOAD_KEY_FILE: PAYLOAD_KEY }));
    expectHidden(m, 'IMAGEBATCH_PAYLOAD_KEY_FILE', PAYLOAD_KEY);
    expect(m).toMatch(/cannot read the file it names \(ENOENT\)/);
  });

  it.each([
    ['user:key@', `https://user:${API_KEY}@api.example.com/api/public/v1`, 'must not contain credentials'],
    ['?api_key=', `https://api.example.com/api/public/v1?api_key=${API_KEY}`, 'must not contain a query'],
    ['?token= (payload key)', `https://api.example.com/v1?token=${encodeURIComponent(PAYLOAD_KEY)}`, 'query'],
  ])('a base URL with %s in IMAGEGEN_BASE_URL', (_, url, problem) => {
    const m = messageOf(() => loadServiceConfig({ IMAGEGEN_BASE_URL: url }));
    expectHidden(m, 'IMAGEGEN_BASE_URL', url, API_KEY);
    expect(m).toContain(problem);
    expect(m).toMatch(/not shown/);
  });

  it.each([
    ['the API key', API_KEY],
    ['Bearer and the key', `Bearer ${API_KEY}`],
    ['a payload key', PAYLOAD_KEY],
  ])('%s in IMAGEGEN_AUTH_HEADER', (_, value) => {
    const m = messageOf(() => loadServiceConfig({ IMAGEGEN_AUTH_HEADER: value }));
    expectHidden(m, 'IMAGEGEN_AUTH_HEADER', value);
    expect(m).toMatch(/bearer/);
    expect(m).toMatch(/<a value of \d+ characters, not shown>/);
  });

  it('a PEM in TEMPORAL_TLS_CLIENT_KEY_PATH (the PEM, not a path)', () => {
    const m = messageOf(() =>
      loadTemporalConfig({ HOME: dir, TEMPORAL_TLS_CLIENT_CERT_DATA: 'CERT', TEMPORAL_TLS_CLIENT_KEY_PATH: PEM }),
    );
    expectHidden(m, 'TEMPORAL_TLS_CLIENT_KEY_PATH', PEM, 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC');
    expect(m).toMatch(/cannot read the file it names/);
    expect(m).toMatch(/TEMPORAL_TLS_CLIENT_KEY_DATA/);
  });

  it('a key in TEMPORAL_CONFIG_FILE', () => {
    const m = messageOf(() => loadTemporalConfig({ HOME: dir, TEMPORAL_CONFIG_FILE: API_KEY }));
    expectHidden(m, 'TEMPORAL_CONFIG_FILE', API_KEY);
    expect(m).toMatch(/cannot read the file it names \(ENOENT\)/);
  });

  it('a key in a variable that is not secret-bearing: TEMPORAL_ADDRESS, TEMPORAL_PROFILE, the metrics address', () => {
    const address = messageOf(() => loadTemporalConfig({ HOME: dir, TEMPORAL_ADDRESS: API_KEY }));
    expectHidden(address, 'TEMPORAL_ADDRESS', API_KEY);
    expect(address).toContain('must be host:port');
    const toml = path.join(dir, 'profiles.toml');
    writeFileSync(toml, '[profile.default]\naddress = "h:7233"\n');
    const profile = messageOf(() =>
      loadTemporalConfig({ HOME: dir, TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: API_KEY }),
    );
    expectHidden(profile, 'TEMPORAL_PROFILE', API_KEY);
    expect(profile).toContain('profiles: default');
    const metrics = messageOf(() => loadMetricsConfig({ IMAGEBATCH_METRICS_ADDRESS: PAYLOAD_KEY }));
    expectHidden(metrics, 'IMAGEBATCH_METRICS_ADDRESS', PAYLOAD_KEY);
  });

  it('a key in a profile field of a file named by TEMPORAL_CONFIG_FILE: the field is named, the path and value not', () => {
    const toml = path.join(dir, 'bad-address.toml');
    writeFileSync(toml, `[profile.default]\naddress = "${API_KEY}"\n`);
    const m = messageOf(() => loadTemporalConfig({ HOME: dir, TEMPORAL_CONFIG_FILE: toml }));
    expectHidden(m, 'profile.default.address', API_KEY);
    expect(m).toContain('TEMPORAL_CONFIG_FILE');
    expect(m).not.toContain(toml);
  });

  it('ordinary mistakes are still quoted, so the message stays useful', () => {
    expect(messageOf(() => loadServiceConfig({ IMAGEGEN_AUTH_HEADER: 'basic' }))).toContain('(got "basic")');
    expect(messageOf(() => loadServiceConfig({ IMAGEGEN_MIN_POLL_INTERVAL_MS: '2s' }))).toContain('(got "2s")');
    expect(messageOf(() => loadTemporalConfig({ HOME: dir, TEMPORAL_ADDRESS: 'http://x:7233' }))).toContain(
      '"http://x:7233"',
    );
  });
});

describe('the redaction helper', () => {
  it.each([
    API_KEY,
    TOKEN,
    `sk_live_${TOKEN}`,
    PAYLOAD_KEY,
    PEM,
    `https://u:p@host/x`,
    `https://host/x?api_key=abc`,
    `https://host/x?access_token=abc`,
    `https://host/x?x-amz-signature=abc&client_secret=1`,
    'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5',
    'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl',
  ])('recognises %s as a secret', (value) => {
    expect(looksLikeSecret(value)).toBe(true);
    expect(describeValue('SOME_SETTING', value)).toBe(`<a value of ${value.length} characters, not shown>`);
  });

  it.each([
    'basic',
    '2s',
    'http://x:7233',
    'https://api.example.com/api/public/v1',
    'http://simulator:8787/api/public/v1?page=2',
    '/creations/{id}',
    'succeeded,completed,complete,success,done',
    'cost_usd,billing.amount_usd,price.total',
    'ns.acct.tmprl.cloud:7233',
    'a-rather-long-but-plain-hostname.internal.example.com',
  ])('quotes %s, which is no secret', (value) => {
    expect(looksLikeSecret(value)).toBe(false);
    expect(describeValue('SOME_SETTING', value)).toBe(JSON.stringify(value));
  });

  it('never shows the value of a secret-bearing variable, nor a file path', () => {
    for (const v of [
      'IMAGEGEN_API_KEY',
      'IMAGEGEN_API_KEY_FILE',
      'IMAGEBATCH_PAYLOAD_KEY_FILE',
      'TEMPORAL_API_KEY',
      'TEMPORAL_TLS_CLIENT_KEY_DATA',
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'TEMPORAL_CONFIG_FILE',
      'TEMPORAL_GRPC_META_AUTHORIZATION',
      'api_key',
      'tls.client_key_data',
      'grpc_meta.authorization',
    ]) {
      expect(isSecretVariable(v), v).toBe(true);
      expect(describeValue(v, 'short')).toBe('<a value of 5 characters, not shown>');
    }
    for (const v of ['IMAGEGEN_AUTH_HEADER', 'IMAGEGEN_BASE_URL', 'TEMPORAL_ADDRESS', 'address', 'TEMPORAL_PROFILE']) {
      expect(isSecretVariable(v), v).toBe(false);
    }
  });
});
