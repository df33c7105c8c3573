import { afterEach, describe, expect, it } from 'vitest';
import { toApplicationFailure } from '../../src/activities/failures';
import { ImageApiClient, type ClientOutcome } from '../../src/api/client';
import { redactJsonValue, redactRawText } from '../../src/api/redact';
import { defaultServiceConfig } from '../../src/config/service-config';
import { SECRET_KEY, startStub, type StubReply, type StubServer } from './helpers/stub-server';

/**
 * Issue #16 point 5: a service that echoes the key JSON-escaped (`\u0069\u006d\u0067\u005f...`) gets past a
 * redaction of the raw text; `JSON.parse` turns the escapes back into the key. Every string of a parsed body
 * must be redacted too.
 */

const TOKEN = SECRET_KEY.slice(-40);

/** Every character as `\uXXXX`: JSON text that parses to `s`. */
const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
/** Only the underscores escaped (`\u005f`). */
const escapeUnderscore = (s: string) => s.replace(/_/g, '\\u005f');

const servers: StubServer[] = [];
const clients: ImageApiClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A stub whose every answer is `reply(escapedKey, escapedToken)` as raw JSON text. */
async function clientAnswering(status: number, body: (k: string, t: string) => string, escape = escapeAll) {
  const server = await startStub((): StubReply => ({
    status,
    headers: { 'content-type': 'application/json', 'retry-after': '1' },
    body: body(escape(SECRET_KEY), escape(TOKEN)),
  }));
  servers.push(server);
  const client = new ImageApiClient({
    config: defaultServiceConfig({ baseUrl: server.url }),
    apiKey: () => SECRET_KEY,
    now: () => 1_000_000,
  });
  clients.push(client);
  return client;
}

/** The outcome, and the failure (message and details) it becomes: everything that reaches history. */
function everything(out: ClientOutcome): string {
  const parts = [JSON.stringify(out)];
  if (out.kind !== 'accepted' && out.kind !== 'ended' && out.kind !== 'models') {
    const failure = toApplicationFailure(out, 1000);
    parts.push(failure.message, JSON.stringify(failure.details));
  }
  return parts.join('\n');
}

function expectClean(out: ClientOutcome): void {
  const all = everything(out);
  expect(all).not.toContain(SECRET_KEY);
  expect(all).not.toContain(TOKEN);
  expect(all).toContain('[REDACTED]');
}

const submit = (c: ImageApiClient) =>
  c.submit({ idempotencyKey: 'b1-r1-1', request: { prompt: 'a fox', model: 'flux-dev' } });

/** An error envelope; `message` is JSON text already (it may hold escapes). */
const envelope = (code: string, message: string) => `{"error":{"code":"${code}","message":"${message}"}}`;

describe('redaction of the key escaped in JSON (issue #16 point 5)', () => {
  it('the escaping helpers make JSON that parses to the key', () => {
    expect(JSON.parse(`"${escapeAll(SECRET_KEY)}"`)).toBe(SECRET_KEY);
    expect(JSON.parse(`"${escapeUnderscore(SECRET_KEY)}"`)).toBe(SECRET_KEY);
  });

  for (const [name, escape] of [
    ['every character escaped', escapeAll],
    ['only \\u005f escaped', escapeUnderscore],
  ] as const) {
    describe(name, () => {
      it('a 400 message, field names and field errors', async () => {
        const c = await clientAnswering(
          400,
          (k, t) =>
            `{"error":{"code":"ERR_INVALID_REQUEST","message":"bad key ${k}","details":{"errors":[` +
            `{"field":"${k}","message":"token ${t}"},"${k}",{"loc":["a","${t}"],"msg":{"${k}":1}}]}}}`,
          escape,
        );
        const out = await submit(c);
        expect(out.kind).toBe('rejected');
        expectClean(out);
      });

      it('a 429 reason, scope and message', async () => {
        const c = await clientAnswering(
          429,
          (k, t) =>
            `{"error":{"code":"ERR_QUOTA_EXCEEDED","message":"${k}","details":{"scope":"${t}","reason":"${k}"}}}`,
          escape,
        );
        const out = await submit(c);
        expect(out.kind).toBe('rateLimited');
        expectClean(out);
      });

      it('a 402 top-up URL and message', async () => {
        const c = await clientAnswering(
          402,
          (k, t) =>
            `{"error":{"code":"ERR_INSUFFICIENT_BALANCE","message":"${k}",` +
            `"details":{"required":0.04,"top_up_url":"https://pay.example/${t}?k=${k}"}}}`,
          escape,
        );
        const out = await submit(c);
        expect(out.kind).toBe('batchStop');
        expectClean(out);
      });

      it("a 401's detail, a 500, a refunded 502 and a poll's 404", async () => {
        const cases: [number, (k: string, t: string) => string][] = [
          [401, (k) => `{"detail":"${k}"}`],
          [500, (k, t) => envelope('ERR_INTERNAL', `${k} ${t}`)],
          [502, (k) => `{"error":{"code":"ERR_GENERATION_FAILED","message":"${k}"}}`],
          [404, (k) => `{"error":{"code":"ERR_NOT_FOUND","message":"${k}"}}`],
        ];
        for (const [status, body] of cases) {
          const c = await clientAnswering(status, body, escape);
          expectClean(status === 404 ? await c.getCreation('cr_1') : await submit(c));
        }
      });

      it('a failed creation: its error (text or object) and status name', async () => {
        for (const error of [(k: string) => `"${k}"`, (k: string, t: string) => `{"why":"${t}","${k}":"x"}`]) {
          const c = await clientAnswering(
            200,
            (k, t) => `{"id":"cr_1","status":"failed","error":${error(k, t)},"note":"${k}"}`,
            escape,
          );
          const out = await c.getCreation('cr_1');
          expect(out).toMatchObject({ kind: 'ended', result: { outcome: 'failed' } });
          expectClean(out);
        }
      });

      it('a status name in flight, image URLs of a success, an accepted status, model names', async () => {
        const inFlight = await clientAnswering(200, (k) => `{"id":"cr_1","status":"running ${k}"}`, escape);
        expectClean(await inFlight.getCreation('cr_1'));
        const done = await clientAnswering(
          200,
          (k, t) => `{"id":"cr_1","status":"succeeded","images":[{"url":"https://cdn.example/${t}.png?${k}"}]}`,
          escape,
        );
        const ok = await done.getCreation('cr_1');
        expect(ok).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded' } });
        expectClean(ok);
        const accepted = await clientAnswering(202, (k) => `{"id":"cr_1","status":"queued ${k}"}`, escape);
        expectClean(await submit(accepted));
        const models = await clientAnswering(
          200,
          (k, t) => `{"data":[{"id":"m-${t}","name":"${k}","price_usd":0.04}]}`,
          escape,
        );
        const listed = await models.listModels();
        expect(listed.kind).toBe('models');
        expectClean(listed);
      });

      it('an unreadable 2xx to a submission whose raw text is described', async () => {
        const c = await clientAnswering(200, (k) => `{"status":"${k}", "oops"`, escape);
        const out = await submit(c);
        expect(out.kind).toBe('ambiguous');
        // The raw text keeps its escapes (not the key); nothing decodes them.
        expect(everything(out)).not.toContain(SECRET_KEY);
        expect(everything(out)).not.toContain(TOKEN);
      });
    });
  }

  it('the token alone, raw, is redacted too', async () => {
    const c = await clientAnswering(
      400,
      (_k, t) => envelope('ERR_INVALID_REQUEST', `token ${t}`),
      (s) => s,
    );
    expectClean(await submit(c));
  });
});

describe('redactRawText and redactJsonValue', () => {
  it('redactRawText finds the key and its token in every JSON spelling, hex of either case', () => {
    const upper = (s: string) => escapeAll(s).toUpperCase().replace(/\\U/g, '\\u');
    for (const spelled of [SECRET_KEY, escapeAll(SECRET_KEY), escapeUnderscore(SECRET_KEY), upper(SECRET_KEY)]) {
      const raw = `{"message":"x ${spelled} y"}`;
      const out = redactRawText(raw, SECRET_KEY);
      expect(JSON.parse(out)).toEqual({ message: 'x [REDACTED] y' });
    }
    expect(JSON.parse(redactRawText(`["${escapeAll(TOKEN)}"]`, SECRET_KEY))).toEqual(['[REDACTED]']);
    const odd = 'a/b"c\\d_live_' + TOKEN;
    expect(redactRawText(JSON.stringify({ k: odd }).replace('/', '\\/'), odd)).toBe('{"k":"[REDACTED]"}');
    expect(redactRawText('nothing here \\n', SECRET_KEY)).toBe('nothing here \\n');
  });

  it('redactJsonValue redacts every string, object keys included, and leaves the rest', () => {
    const v = { a: [1, true, null, `k=${SECRET_KEY}`], [TOKEN]: { b: `t ${TOKEN}` }, n: 2 };
    expect(redactJsonValue(v, SECRET_KEY)).toEqual({
      a: [1, true, null, 'k=[REDACTED]'],
      '[REDACTED]': { b: 't [REDACTED]' },
      n: 2,
    });
    expect(redactJsonValue(v, undefined)).toBe(v);
  });
});
