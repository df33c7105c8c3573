import { describe, expect, it } from 'vitest';
import { REDACTED, redactSecret } from '../../src/api/redact';
import { SECRET_KEY } from './helpers/stub-server';

/**
 * Issue 44, point 5: the security review got the key past the redaction as base64 wrapped at 64 columns (as
 * `openssl base64` prints it), base64 of base64, upper-case hex and HTML character references. Each form, written
 * here independently of src/api/redact.ts, must leave no trace of the key: neither the form itself nor any 16
 * characters of it in a row.
 */
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const wrapped = (s: string) => s.replace(/.{64}/g, '$&\n');
const decimalRefs = (s: string) => [...s].map((c) => `&#${c.charCodeAt(0)};`).join('');
const hexRefs = (s: string) => [...s].map((c) => `&#x${c.charCodeAt(0).toString(16).toUpperCase()};`).join('');

const FORMS: Record<string, string> = {
  'base64 wrapped at 64 columns': wrapped(b64(`Authorization: Bearer ${SECRET_KEY}`)),
  'base64 of base64': b64(b64(SECRET_KEY)),
  'base64 of base64, wrapped': wrapped(b64(b64(`key=${SECRET_KEY}`))),
  'upper-case hex': Buffer.from(SECRET_KEY, 'utf8').toString('hex').toUpperCase(),
  'decimal character references': decimalRefs(SECRET_KEY),
  'hex character references': hexRefs(SECRET_KEY),
  'character references of base64': decimalRefs(b64(SECRET_KEY)),
};

describe('redaction of the key in the forms the review found', () => {
  it.each(Object.entries(FORMS))('%s', (_, form) => {
    const text = `the service said: ${form} (request 42)`;
    const out = redactSecret(text, SECRET_KEY);
    expect(out).toContain(REDACTED);
    expect(out).toContain('the service said: ');
    expect(out).toContain(' (request 42)');
    // No run of 16 characters of the form survives (the whole form is gone, not only part of it).
    const rest = out.replace(REDACTED, '');
    for (let i = 0; i + 16 <= form.length; i += 8) expect(rest).not.toContain(form.slice(i, i + 16));
  });

  it('text that only looks encoded is kept as it is', () => {
    const text = 'an image at https://cdn.example/aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ.png &amp; a line\nbreak';
    expect(redactSecret(text, SECRET_KEY)).toBe(text);
  });
});
