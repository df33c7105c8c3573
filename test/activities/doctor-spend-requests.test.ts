import { describe, expect, it } from 'vitest';
import type { ClientOutcome, ImageApiClient } from '../../src/api/client';
import { loadServiceConfig } from '../../src/config/service-config';
import type { RawRead } from '../../src/doctor/raw-read';
import { pollUntilEnded, submitOne, type SpendContext } from '../../src/doctor/spend-requests';

/**
 * Doctor's paid test, its submission and its polls, answer by answer: what it waits in place, when it gives up, and
 * what it tells. A fake client answers from a list; the clock moves only by the test's own sleeps (no timers).
 */

const INTERVAL_MS = 100;
const config = loadServiceConfig({
  IMAGEGEN_BASE_URL: 'https://images.example.test/v1',
  IMAGEGEN_MAX_AMBIGUOUS_TRIES: '3',
  IMAGEGEN_BACKOFF_BASE_MS: '1000',
  IMAGEGEN_BACKOFF_MAX_MS: '1500',
});

function contextOf(answers: ClientOutcome[], raw: unknown = undefined, raws: RawRead[] = []) {
  let clock = 1_000_000;
  const sleeps: number[] = [];
  const sent: string[] = [];
  const next = (what: string): ClientOutcome => {
    sent.push(what);
    const answer = answers.shift();
    if (!answer) throw new Error(`no answer left for ${what}`);
    return answer;
  };
  const client = {
    submit: async () => next('submit'),
    getCreation: async () => next('poll'),
    pollIntervalMs: () => INTERVAL_MS,
  } as unknown as ImageApiClient;
  const ctx = {
    deps: { config, apiKey: () => 'k', outputRoot: '/nowhere' },
    options: { model: 'm1', testId: 't', outDir: 'out', maxWaitMs: 600_000 },
    client,
    key: 'k',
    models: undefined,
    now: () => clock,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      clock += ms;
    },
    add: () => undefined,
    addSetting: () => undefined,
    settle: () => undefined,
    raw: async () => {
      sent.push('raw');
      return raws.shift() ?? { status: 200, json: raw };
    },
  } as unknown as SpendContext;
  return { ctx, sleeps, sent, deadline: clock + 600_000 };
}

const limited = (retryAfterMs: number): ClientOutcome => ({
  kind: 'rateLimited',
  httpStatus: 429,
  code: 'ERR_RATE_LIMIT',
  message: 'slow down',
  retryAfterMs,
});

describe("doctor's submission", () => {
  it('waits out a short Retry-After in place and sends the same key again', async () => {
    const { ctx, sleeps, sent, deadline } = contextOf([
      limited(500),
      { kind: 'accepted', creationId: 'c1', status: 'queued', replayed: true },
    ]);
    expect(await submitOne(ctx, 'key-1', deadline)).toEqual({ kind: 'accepted', creationId: 'c1', replayed: true });
    expect(sleeps).toEqual([500]);
    expect(sent).toEqual(['submit', 'submit']);
  });

  it('reports a Retry-After longer than it waits in place: nothing charged', async () => {
    const { ctx, sleeps, deadline } = contextOf([limited(61_000)]);
    expect(await submitOne(ctx, 'key-1', deadline)).toEqual({
      kind: 'failed',
      check: {
        found: 'HTTP 429 ERR_RATE_LIMIT: slow down (retry after 61000 ms); nothing charged',
        hint: 'run it again later',
      },
    });
    expect(sleeps).toEqual([]);
  });

  it('tries a send that never left as an outage, with backoff, then says nothing was charged', async () => {
    const notSent: ClientOutcome = { kind: 'notSent', lastError: 'ECONNREFUSED' };
    const { ctx, sleeps, sent, deadline } = contextOf([notSent, notSent, notSent]);
    const result = await submitOne(ctx, 'key-1', deadline);
    expect(result).toMatchObject({ kind: 'failed', check: { found: 'not sent (ECONNREFUSED): nothing was charged' } });
    expect(sleeps).toEqual([1000, 1500]);
    expect(sent).toHaveLength(3);
  });

  it('a send that may have reached the service, then sends that never left: unknown, never "nothing charged"', async () => {
    const notSent: ClientOutcome = { kind: 'notSent', lastError: 'ECONNREFUSED' };
    const { ctx, deadline } = contextOf([{ kind: 'ambiguous', lastError: 'socket hang up' }, notSent, notSent]);
    expect(await submitOne(ctx, 'key-1', deadline)).toMatchObject({
      kind: 'failed',
      check: { found: 'outcome unknown (ECONNREFUSED): the creation may have been charged' },
    });
  });

  it('gives up on answers it cannot read after the tries: the outcome is unknown, and may have been charged', async () => {
    const { ctx, sleeps, deadline } = contextOf([
      { kind: 'ambiguous', httpStatus: 500, lastError: 'HTTP 500: oops' },
      { kind: 'malformed', lastError: 'no id' },
      { kind: 'ambiguous', lastError: 'socket hang up' },
    ]);
    const result = await submitOne(ctx, 'key-1', deadline);
    expect(result).toMatchObject({
      kind: 'failed',
      check: { found: 'outcome unknown (socket hang up): the creation may have been charged' },
    });
    expect(sleeps).toEqual([1000, 1500]);
  });

  it('takes an answer no submission gets as an unknown outcome at once', async () => {
    const { ctx, sent, deadline } = contextOf([{ kind: 'inFlight', status: 'running' }]);
    expect(await submitOne(ctx, 'key-1', deadline)).toMatchObject({
      kind: 'failed',
      check: {
        found: 'outcome unknown (unexpected inFlight answer to a submission): the creation may have been charged',
      },
    });
    expect(sent).toEqual(['submit']);
  });

  it('tells each answer that ends the key in its own words', async () => {
    const cases: [ClientOutcome, { found: string; hint?: string }][] = [
      [
        { kind: 'refunded', details: { httpStatus: 502, code: 'ERR_GENERATION_FAILED', message: 'boom' } },
        {
          found: 'HTTP 502 ERR_GENERATION_FAILED: boom (charged and refunded)',
          hint: 'the service is having trouble; run it again later with another --test-id',
        },
      ],
      [
        {
          kind: 'rejected',
          details: {
            httpStatus: 400,
            code: 'ERR_VALIDATION',
            message: 'bad',
            fieldErrors: [{ field: 'prompt', message: 'too long' }],
          },
        },
        {
          found: 'HTTP 400 ERR_VALIDATION: bad (prompt: too long); nothing charged',
          hint: 'check IMAGEGEN_SUBMIT_PATH and how requests are mapped',
        },
      ],
      [
        {
          kind: 'batchStop',
          details: {
            reason: 'insufficient_balance',
            httpStatus: 402,
            message: 'top up',
            topUpUrl: 'https://pay.example.test',
          },
        },
        {
          found: 'HTTP 402 insufficient_balance: top up; nothing charged',
          hint: "top up the wallet (https://pay.example.test) or raise the key's budget",
        },
      ],
      [{ kind: 'config', message: 'the key is malformed' }, { found: 'the key is malformed' }],
    ];
    for (const [answer, check] of cases) {
      const { ctx, deadline } = contextOf([answer]);
      expect(await submitOne(ctx, 'key-1', deadline), answer.kind).toEqual({ kind: 'failed', check });
    }
  });
});

describe("doctor's polls", () => {
  it('polls at the interval until the creation ends, then reads its record once more, raw', async () => {
    const ended: ClientOutcome = { kind: 'ended', result: { outcome: 'succeeded', status: 'succeeded', images: [] } };
    const { ctx, sleeps, sent, deadline } = contextOf([{ kind: 'inFlight', status: 'running' }, limited(300), ended], {
      id: 'c1',
      status: 'succeeded',
    });
    const polled = await pollUntilEnded(ctx, 'c1', deadline);
    expect(polled).toMatchObject({ kind: 'ended', polls: 3, intervalMs: INTERVAL_MS, json: { id: 'c1' } });
    // "running" is in flight: polling goes on; a 429's Retry-After stretches the next wait.
    expect(sent).toEqual(['poll', 'poll', 'poll', 'raw']);
    expect(sleeps).toEqual([INTERVAL_MS, INTERVAL_MS, 300, INTERVAL_MS]);
  });

  it('waits out a 429 on the raw read of the ended record, as its Retry-After says, within --max-wait', async () => {
    const ended: ClientOutcome = { kind: 'ended', result: { outcome: 'succeeded', status: 'succeeded', images: [] } };
    const refused: RawRead = { status: 429, json: undefined, retryAfterMs: 3000 };
    const { ctx, sleeps, sent, deadline } = contextOf([ended], { id: 'c1', status: 'succeeded' }, [refused]);
    expect(await pollUntilEnded(ctx, 'c1', deadline)).toMatchObject({ kind: 'ended', json: { id: 'c1' } });
    expect(sent).toEqual(['poll', 'raw', 'raw']);
    expect(sleeps).toEqual([INTERVAL_MS, INTERVAL_MS, 3000]);

    // A Retry-After past --max-wait is not waited: the record is not shown.
    const late = contextOf([ended], { id: 'c1' }, [{ status: 429, json: undefined, retryAfterMs: 700_000 }]);
    expect(await pollUntilEnded(late.ctx, 'c1', late.deadline)).toMatchObject({ kind: 'ended', json: undefined });
    expect(late.sent).toEqual(['poll', 'raw']);
  });

  it("keeps an in-flight answer's Retry-After: no read of the creation sooner", async () => {
    const ended: ClientOutcome = { kind: 'ended', result: { outcome: 'succeeded', status: 'succeeded', images: [] } };
    const hinted: ClientOutcome = { kind: 'inFlight', status: 'running', retryAfterMs: 500 };
    const { ctx, sleeps, sent, deadline } = contextOf([hinted, ended], { id: 'c1', status: 'running' });
    expect(await pollUntilEnded(ctx, 'c1', deadline)).toMatchObject({ kind: 'ended', polls: 2 });
    expect(sent).toEqual(['poll', 'poll', 'raw']);
    expect(sleeps).toEqual([INTERVAL_MS, 500, INTERVAL_MS]);
  });

  it('a status in no set whose URLs are no image: judged once, as a batch judges it, and polled on', async () => {
    const ended: ClientOutcome = { kind: 'ended', result: { outcome: 'succeeded', status: 'succeeded', images: [] } };
    const unrecognised = { urls: [{ url: 'https://files.example/logs/c1.txt', at: 'logs (discovered)' }] };
    const uploading: ClientOutcome = { kind: 'inFlight', status: 'uploading', unrecognised };
    const { ctx, sent, deadline } = contextOf([uploading, uploading, ended], { id: 'c1' });
    const judged: string[] = [];
    ctx.deps.judgeStatus = async (status) => {
      judged.push(status);
      return { status, why: 'logs (discovered): not an image' };
    };
    expect(await pollUntilEnded(ctx, 'c1', deadline)).toMatchObject({ kind: 'ended', polls: 3 });
    expect(judged).toEqual(['uploading']);
    expect(sent).toEqual(['poll', 'poll', 'poll', 'raw']);
  });

  it('a status in no set whose URL is an image: what the record says, to name the word as a success', async () => {
    const unrecognised = { urls: [{ url: 'https://cdn.example/c1.png', at: 'result.sample (discovered)' }] };
    const ready: ClientOutcome = { kind: 'inFlight', status: 'Ready', unrecognised };
    const { ctx, deadline } = contextOf([ready], { id: 'c1', status: 'Ready' });
    const image = { at: 'result.sample (discovered)', type: 'image/png' };
    ctx.deps.judgeStatus = async () => ({ status: 'ready', image });
    expect(await pollUntilEnded(ctx, 'c1', deadline)).toMatchObject({
      kind: 'unrecognised',
      status: 'Ready',
      json: { id: 'c1' },
      check: { image },
    });
  });

  it('tells each answer that ends the polling in its own words', async () => {
    const cases: [ClientOutcome, { found: string; hint?: string }][] = [
      [
        { kind: 'notFound', httpStatus: 404, code: 'ERR_NOT_FOUND', message: 'gone' },
        {
          found: 'the service says creation c1 does not exist (404 ERR_NOT_FOUND); it was accepted, so it was paid for',
          hint: 'ask the service about the creation id; --test-id <another name> pays for a new test',
        },
      ],
      [
        { kind: 'ambiguous', httpStatus: 404, lastError: 'HTTP 404: page', unrecognizedNotFound: true },
        {
          found: 'a poll of creation c1 answered 404 without ERR_NOT_FOUND (HTTP 404: page)',
          hint: "set IMAGEGEN_CREATION_PATH to the service's path of a creation",
        },
      ],
      [
        { kind: 'batchStop', details: { reason: 'api_key_invalid', httpStatus: 401, message: 'who?' } },
        { found: 'HTTP 401 api_key_invalid: who?' },
      ],
      [{ kind: 'config', message: 'bad setting' }, { found: 'bad setting' }],
      [
        { kind: 'refunded', details: { httpStatus: 502, code: 'ERR_GENERATION_FAILED', message: 'boom' } },
        { found: 'unexpected refunded answer to a poll' },
      ],
      [{ kind: 'accepted', creationId: 'c2', status: 'queued' }, { found: 'unexpected accepted answer to a poll' }],
      [{ kind: 'malformed', lastError: 'no status' }, { found: 'a poll of creation c1: no status' }],
    ];
    for (const [answer, check] of cases) {
      const { ctx, deadline } = contextOf([answer]);
      expect(await pollUntilEnded(ctx, 'c1', deadline), answer.kind).toEqual({ kind: 'failed', check });
    }
  });

  it('gives up after the tries when polls keep going unanswered', async () => {
    const lost: ClientOutcome = { kind: 'notSent', lastError: 'ECONNRESET' };
    const { ctx, sent, deadline } = contextOf([lost, { kind: 'ambiguous', lastError: 'timeout' }, lost]);
    expect(await pollUntilEnded(ctx, 'c1', deadline)).toEqual({
      kind: 'failed',
      check: { found: 'polls of creation c1 keep failing: ECONNRESET' },
    });
    expect(sent).toEqual(['poll', 'poll', 'poll']);
  });
});
