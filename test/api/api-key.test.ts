import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiKeyError, describeApiKeyProblem, keyFingerprint } from '../../src/api/api-key';
import { loadApiKey } from '../../src/config/api-key';
import { SECRET_KEY } from './helpers/stub-server';

const TOKEN = 'SeCrEt0123456789abcdefghijKLMNOPQRSTUVWX';
const dir = mkdtempSync(path.join(tmpdir(), 'imagebatch-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(fn: () => unknown): ApiKeyError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiKeyError) return err;
    throw err;
  }
  throw new Error('expected an ApiKeyError');
}

describe('API key format', () => {
  it('accepts <prefix>live_<40 letters or digits>, any prefix', () => {
    expect(describeApiKeyProblem(SECRET_KEY)).toBeUndefined();
    expect(describeApiKeyProblem(`live_${TOKEN}`)).toBeUndefined();
    expect(describeApiKeyProblem(`sk_other_live_${TOKEN}`)).toBeUndefined();
  });

  it.each([
    [`img_${TOKEN}`, 'does not contain "live_"'],
    [`img_live_${TOKEN}A`, 'has 41 characters; 40 expected'],
    [`img_live_${TOKEN.slice(0, 30)}`, 'has 30 characters; 40 expected'],
    [`img_live_${TOKEN.slice(0, 38)}-_`, '2 character(s) other than A-Z, a-z, 0-9'],
    [`img_live_${TOKEN} `, 'contains whitespace'],
    ['', 'is empty'],
  ])('says what is wrong with %#, never quoting the key', (key, problem) => {
    const message = describeApiKeyProblem(key) ?? '';
    expect(message).toContain(problem);
    expect(message).toContain('IMAGEGEN_API_KEY');
    if (key) {
      expect(message).not.toContain(key.trim());
      expect(message).not.toContain(TOKEN.slice(0, 10));
    }
  });
});

describe('loadApiKey', () => {
  it('reads IMAGEGEN_API_KEY', () => {
    expect(loadApiKey({ IMAGEGEN_API_KEY: SECRET_KEY })).toBe(SECRET_KEY);
  });

  it('reads IMAGEGEN_API_KEY_FILE and removes one trailing newline (LF or CRLF)', () => {
    const lf = path.join(dir, 'lf');
    const crlf = path.join(dir, 'crlf');
    writeFileSync(lf, `${SECRET_KEY}\n`);
    writeFileSync(crlf, `${SECRET_KEY}\r\n`);
    expect(loadApiKey({ IMAGEGEN_API_KEY_FILE: lf })).toBe(SECRET_KEY);
    expect(loadApiKey({ IMAGEGEN_API_KEY_FILE: crlf })).toBe(SECRET_KEY);
  });

  it('refuses a file with extra lines, naming the file as the source', () => {
    const two = path.join(dir, 'two');
    writeFileSync(two, `${SECRET_KEY}\n\n`);
    const err = errorOf(() => loadApiKey({ IMAGEGEN_API_KEY_FILE: two }));
    expect(err.message).toMatch(/file named by IMAGEGEN_API_KEY_FILE contains whitespace/);
    expect(err.message).not.toContain(SECRET_KEY);
  });

  it('says when neither or both are set, and when the file cannot be read', () => {
    expect(errorOf(() => loadApiKey({})).message).toMatch(/no API key: set IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE/);
    expect(errorOf(() => loadApiKey({ IMAGEGEN_API_KEY: SECRET_KEY, IMAGEGEN_API_KEY_FILE: '/x' })).message).toMatch(
      /only one of/,
    );
    const missing = path.join(dir, 'missing');
    const unreadable = errorOf(() => loadApiKey({ IMAGEGEN_API_KEY_FILE: missing })).message;
    expect(unreadable).toBe('IMAGEGEN_API_KEY_FILE: cannot read the file it names (ENOENT)');
    // The path is named by its variable, never printed: it may be the key itself, put in the wrong variable.
    expect(unreadable).not.toContain(missing);
  });
});

describe('fingerprint', () => {
  it('the fingerprint does not contain the key (redaction: src/api/redact.ts)', () => {
    expect(keyFingerprint(SECRET_KEY)).toMatch(/^[0-9a-f]{12}$/);
    expect(keyFingerprint(SECRET_KEY)).not.toBe(keyFingerprint(`img_live_${'A'.repeat(40)}`));
  });
});
