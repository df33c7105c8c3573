import { afterEach, describe, expect, it } from 'vitest';
import { toApplicationFailure } from '../../src/activities/failures';
import { ImageApiClient, type ClientOutcome } from '../../src/api/client';
import { redactJsonValue, redactRawText, redactSecret } from '../../src/api/redact';
import { defaultServiceConfig } from '../../src/config/service-config';
import { SECRET_KEY, startStub, type StubServer } from './helpers/stub-server';

/**
 * Issue #30 item 8, leak 1: a service that puts the key into its error text base64-encoded (standard or URL-safe,
 * padded or not, alone or inside `Bearer <key>` or `user:key`), JSON-escaped twice, percent-encoded or in hex got
 * it past the redaction into workflow history, results and the ledger.
 */

const TOKEN = SECRET_KEY.slice(-40);

/**
 * The forms a search must not find (independent of src/api/redact.ts): the key and its token raw, in hex, and in
 * base64 / base64url at each byte alignment (only the characters that depend on the secret alone).
 */
function formsOf(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const forms = [secret, bytes.toString('hex'), bytes.toString('hex').toUpperCase()];
  for (let shift = 0; shift < 3; shift++) {
    const b64 = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64');
    const inner = b64.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
    forms.push(inner, inner.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return forms;
}
const FORMS = [...formsOf(SECRET_KEY), ...formsOf(TOKEN)];

/** Every form found in `text`, also after undoing up to three layers of JSON escapes and percent-encoding. */
function formsIn(text: string): string[] {
  const views = [text];
  let t = text;
  for (let i = 0; i < 3; i++) {
    t = t.replace(
      /\\u([0-9a-fA-F]{4})|\\(["\\/])|%([0-9a-fA-F]{2})/g,
      (_m, u?: string, c?: string, p?: string) => c ?? String.fromCharCode(parseInt(u ?? p ?? '', 16)),
    );
    views.push(t);
  }
  return FORMS.filter((f) => views.some((v) => v.includes(f)));
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const b64url = (s: string) => Buffer.from(s, 'utf8').toString('base64url');
/** JSON string content for `s` (no quotes), as a JSON encoder writes it. */
const jsonContent = (s: string) => JSON.stringify(s).slice(1, -1);
/** Every character as `\uXXXX`. */
const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

/** Text that holds the key, as a service might put it into a message (the decoded string, before JSON). */
const ENCODED: Record<string, string> = {
  'base64 of the key': `bad credential ${b64(SECRET_KEY)}`,
  'base64 of the key, no padding': `bad credential ${b64(SECRET_KEY).replace(/=+$/, '')}`,
  'base64url of the key': `bad credential ${b64url(SECRET_KEY)}`,
  'base64 of the token': `bad token ${b64(TOKEN)}`,
  'base64 of Bearer <key>': `header was ${b64(`Bearer ${SECRET_KEY}`)}`,
  'base64url of Bearer <key>': `header was ${b64url(`Bearer ${SECRET_KEY}`)}`,
  'base64 of user:key': `Basic ${b64(`u:${SECRET_KEY}`)}`,
  'base64 of apikey:token': `Basic ${b64(`apikey:${TOKEN}`)}`,
  'base64url of user:key': `Basic ${b64url(`u:${SECRET_KEY}`)}`,
  'percent-encoded key': `GET /x?api_key=${SECRET_KEY.replace(/_/g, '%5F')}`,
  'every character percent-encoded': `q=${[...Buffer.from(SECRET_KEY)].map((b) => `%${b.toString(16)}`).join('')}`,
  'hex of the key': `key hex ${Buffer.from(SECRET_KEY).toString('hex')}`,
  'JSON text holding the key': JSON.stringify({ detail: `key ${SECRET_KEY}` }),
  'JSON text holding the escaped key': `{"detail":"key ${escapeAll(SECRET_KEY)}"}`,
  'JSON text holding a quote-escaped key': JSON.stringify({ detail: `"${SECRET_KEY}"` }),
  'JSON text holding the base64 key': JSON.stringify({ auth: b64(`Bearer ${SECRET_KEY}`) }),
};

describe('redaction of encoded forms of the key', () => {
  it('the forms are there before redaction (the check can fail)', () => {
    for (const [name, text] of Object.entries(ENCODED)) {
      expect(formsIn(`{"message":"${jsonContent(text)}"}`), name).not.toEqual([]);
    }
  });

  it('redactRawText removes every form from raw JSON text, one JSON layer deep', () => {
    for (const [name, text] of Object.entries(ENCODED)) {
      const raw = `{"message":"${jsonContent(text)}"}`;
      const out = redactRawText(raw, SECRET_KEY);
      expect(formsIn(out), name).toEqual([]);
      expect((JSON.parse(out) as { message: string }).message, name).toContain('[REDACTED]');
    }
  });

  it('redactRawText removes every form from JSON text inside a JSON string (escaped twice)', () => {
    for (const [name, text] of Object.entries(ENCODED)) {
      const inner = JSON.stringify({ message: text });
      const raw = JSON.stringify({ error: { message: inner } });
      expect(raw, name).toMatch(/\\\\|\\"/);
      const out = redactRawText(raw, SECRET_KEY);
      expect(formsIn(out), name).toEqual([]);
      // Still valid JSON, twice over.
      const outer = JSON.parse(out) as { error: { message: string } };
      expect((JSON.parse(outer.error.message) as { message: string }).message, name).toContain('[REDACTED]');
    }
  });

  it('redactRawText finds the key as \\\\u005f and \\\\\\" spell it, escaped twice', () => {
    const odd = `a"b_live_${TOKEN}`;
    const twice = JSON.stringify(JSON.stringify({ k: odd }));
    expect(twice).toContain('\\\\\\"');
    expect(redactRawText(twice, odd)).toBe(JSON.stringify(JSON.stringify({ k: '[REDACTED]' })));
    const underscores = `"x ${SECRET_KEY.replace(/_/g, '\\\\u005f')} y"`;
    expect(redactRawText(underscores, SECRET_KEY)).toBe('"x [REDACTED] y"');
  });

  it('redactSecret and redactJsonValue remove every form from decoded strings', () => {
    for (const [name, text] of Object.entries(ENCODED)) {
      expect(formsIn(redactSecret(text, SECRET_KEY)), name).toEqual([]);
      const value = redactJsonValue({ list: [text], [text]: 1 }, SECRET_KEY);
      expect(formsIn(JSON.stringify(value)), name).toEqual([]);
    }
  });

  it('the padding and the characters shared with the text around an encoded key go with it', () => {
    expect(redactSecret(`x ${b64(SECRET_KEY)} y`, SECRET_KEY)).toBe('x [REDACTED] y');
    expect(redactSecret(`Basic ${b64(`u:${SECRET_KEY}`)}.`, SECRET_KEY)).toMatch(
      /^Basic [A-Za-z0-9]{0,2}\[REDACTED\]\.$/,
    );
  });

  it('leaves text without the key as it was', () => {
    const plain = `{"message":"nothing \\u005f here %41 ${b64('something else entirely, long enough')}"}`;
    expect(redactRawText(plain, SECRET_KEY)).toBe(plain);
    expect(redactSecret('img_live_short', SECRET_KEY)).toBe('img_live_short');
  });
});

const servers: StubServer[] = [];
const clients: ImageApiClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** The outcome, and the failure (message and details) it becomes: everything that reaches history. */
function everything(out: ClientOutcome): string {
  const parts = [JSON.stringify(out)];
  if (out.kind !== 'accepted' && out.kind !== 'ended' && out.kind !== 'models') {
    const failure = toApplicationFailure(out, 1000);
    parts.push(failure.message, JSON.stringify(failure.details));
  }
  return parts.join('\n');
}

describe('through the client', () => {
  it('an error text holding the key in any of these forms leaves the outcome and its failure without it', async () => {
    const texts = Object.values(ENCODED);
    const twice = Object.values(ENCODED).map((t) => JSON.stringify({ message: t }));
    const messages = [...texts, ...twice];
    const server = await startStub((_req, i) => ({
      status: 400,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: { code: 'ERR_INVALID_REQUEST', message: messages[i] ?? '' } }),
    }));
    servers.push(server);
    const client = new ImageApiClient({
      config: defaultServiceConfig({ baseUrl: server.url }),
      apiKey: () => SECRET_KEY,
      now: () => 1_000_000,
    });
    clients.push(client);
    for (const [i, message] of messages.entries()) {
      const out = await client.submit({ idempotencyKey: `k-${i}`, request: { prompt: 'a fox', model: 'flux-dev' } });
      expect(out.kind, message).toBe('rejected');
      const kept = everything(out);
      expect(formsIn(kept), message).toEqual([]);
      expect(kept, message).toContain('[REDACTED]');
    }
    expect(server.requests).toHaveLength(messages.length);
  });
});
