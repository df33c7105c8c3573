import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../../src/api/money';
import { describe, expect, it } from 'vitest';
import { classifyResponse, RequestKind, type ClassifyInput, type Outcome } from '../../src/api/classify';
import { toApplicationFailure } from '../../src/activities/failures';
import { DEFAULT_SUCCESS_STATUSES, ErrorCode, FailureMessage, HTTP_STATUS_OF } from '../../src/api/contract';
import { BatchStopReason, FailureType } from '../../src/model';
import { RequestTimeoutError } from '../../src/api/http';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../src/api/retry-after';

const NOW = Date.parse('2026-11-21T10:00:00Z');

function classify(
  kind: ClassifyInput['kind'],
  status: number | undefined,
  body?: unknown,
  headers: Record<string, string> = {},
): Outcome {
  return classifyResponse({
    kind,
    ...(status === undefined ? {} : { status, headers }),
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    nowMs: NOW,
    successStatuses: DEFAULT_SUCCESS_STATUSES,
    costFields: DEFAULT_COST_FIELDS,
    priceFields: DEFAULT_PRICE_FIELDS,
    defaultRetryAfterMs: 1000,
  });
}

const envelope = (code: string, message = 'msg', details?: unknown) => ({
  error: { code, message, ...(details === undefined ? {} : { details }) },
});

describe('Retry-After', () => {
  it('reads delay-seconds, decimals and the HTTP-date form', () => {
    expect(parseRetryAfter('3', NOW)).toBe(3000);
    expect(parseRetryAfter(' 1 ', NOW)).toBe(1000);
    expect(parseRetryAfter('0.5', NOW)).toBe(500);
    expect(parseRetryAfter('Sat, 21 Nov 2026 10:00:07 GMT', NOW)).toBe(7000);
    expect(parseRetryAfter(['2', '9'], NOW)).toBe(2000);
  });
  it('caps a wait longer than an hour at an hour, in either form', () => {
    expect(parseRetryAfter('7200', NOW)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('9'.repeat(400), NOW)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('Fri, 31 Dec 9999 23:59:59 GMT', NOW)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('3600', NOW)).toBe(3_600_000);
  });
  it('gives 0 for a date in the past and undefined for garbage or nothing', () => {
    expect(parseRetryAfter('Sat, 21 Nov 2026 09:00:00 GMT', NOW)).toBe(0);
    for (const v of [undefined, null, '', 'soon', '-5', '1e3', 'NaN', '12abc', '12:00', 'Tomorrow 10:00']) {
      expect(parseRetryAfter(v, NOW), String(v)).toBeUndefined();
    }
  });
});

describe('classifyResponse: submission', () => {
  it('202 gives the creation id, status and cost; a replay header is read', () => {
    const record = { id: 'cr_1', status: 'queued', cost_usd: 0.04, extra: { anything: true } };
    expect(classify(RequestKind.Submit, 202, record)).toEqual({
      kind: 'accepted',
      creationId: 'cr_1',
      status: 'queued',
      costUsd: 0.04,
    });
    expect(classify(RequestKind.Submit, 202, record, { 'idempotent-replayed': 'true' })).toMatchObject({
      kind: 'accepted',
      replayed: true,
    });
    expect(classify(RequestKind.Submit, 202, { data: record })).toMatchObject({ kind: 'accepted', creationId: 'cr_1' });
  });

  it('a 2xx without a readable creation id is ambiguous (it may have been charged)', () => {
    expect(classify(RequestKind.Submit, 202, '{not json')).toMatchObject({ kind: 'ambiguous', httpStatus: 202 });
    expect(classify(RequestKind.Submit, 202, { status: 'queued' })).toMatchObject({ kind: 'ambiguous' });
    expect(classify(RequestKind.Submit, 202, '')).toMatchObject({ kind: 'ambiguous' });
  });

  it('400 ERR_INVALID_REQUEST is rejected with every field error', () => {
    const errors = [
      { field: 'width', message: 'must be a multiple of 64' },
      { field: 'Idempotency-Key', message: 'reused with a different body' },
    ];
    expect(classify(RequestKind.Submit, 400, envelope(ErrorCode.InvalidRequest, 'bad', { errors }))).toEqual({
      kind: 'rejected',
      details: { httpStatus: 400, code: ErrorCode.InvalidRequest, message: 'bad', fieldErrors: errors },
    });
  });

  it('400 ERR_CONTENT_POLICY (reserved) and a 400 with odd error entries are rejected too', () => {
    expect(classify(RequestKind.Submit, 400, envelope(ErrorCode.ContentPolicy))).toMatchObject({
      kind: 'rejected',
      details: { code: ErrorCode.ContentPolicy, fieldErrors: [] },
    });
    const odd = envelope(ErrorCode.InvalidRequest, 'bad', {
      errors: ['plain text', { loc: ['body', 'seed'], msg: 'too big' }],
    });
    expect(classify(RequestKind.Submit, 400, odd)).toMatchObject({
      details: {
        fieldErrors: [
          { field: '', message: 'plain text' },
          { field: 'body.seed', message: 'too big' },
        ],
      },
    });
  });

  it('404 ERR_MODEL_NOT_FOUND is rejected', () => {
    expect(classify(RequestKind.Submit, 404, envelope(ErrorCode.ModelNotFound, 'no such model'))).toMatchObject({
      kind: 'rejected',
      details: { httpStatus: 404, code: ErrorCode.ModelNotFound, message: 'no such model' },
    });
  });

  it('402 insufficient balance keeps required, balance and the top-up URL', () => {
    const body = envelope(ErrorCode.InsufficientBalance, 'Insufficient balance', {
      required: 0.04,
      balance: 0.01,
      top_up_url: 'https://portal/top-up',
    });
    expect(classify(RequestKind.Submit, 402, body)).toEqual({
      kind: 'batchStop',
      details: {
        reason: BatchStopReason.InsufficientBalance,
        httpStatus: 402,
        message: 'Insufficient balance',
        requiredUsd: 0.04,
        balanceUsd: 0.01,
        topUpUrl: 'https://portal/top-up',
      },
    });
  });

  it('402 monthly budget keeps the cap, under the documented and other field names', () => {
    const documented = envelope(ErrorCode.InsufficientBalance, 'Budget', {
      reason: 'monthly_budget_exceeded',
      monthly_cap_usd: 50,
      required: 0.04,
      top_up_url: 'https://portal/x',
    });
    expect(classify(RequestKind.Submit, 402, documented)).toMatchObject({
      kind: 'batchStop',
      details: {
        reason: BatchStopReason.MonthlyBudgetExceeded,
        monthlyCapUsd: 50,
        requiredUsd: 0.04,
        topUpUrl: 'https://portal/x',
      },
    });
    const other = envelope(ErrorCode.InsufficientBalance, 'Budget', {
      reason: 'monthly_budget_exceeded',
      budget_cap: 25,
      portal_link: 'https://portal/y',
    });
    expect(classify(RequestKind.Submit, 402, other)).toMatchObject({
      details: { reason: BatchStopReason.MonthlyBudgetExceeded, monthlyCapUsd: 25, topUpUrl: 'https://portal/y' },
    });
  });

  it.each([
    [401, 'authentication_required', BatchStopReason.AuthenticationRequired],
    [401, 'api_key_invalid', BatchStopReason.ApiKeyInvalid],
    [403, 'account_disabled', BatchStopReason.AccountDisabled],
  ])('%i {detail: %s} stops the batch', (status, detail, reason) => {
    for (const kind of Object.values(RequestKind)) {
      expect(classify(kind, status, { detail })).toEqual({
        kind: 'batchStop',
        details: { reason, httpStatus: status, message: detail },
      });
    }
  });

  it('401 with the reserved envelope code or an unreadable body still stops the batch', () => {
    expect(classify(RequestKind.Submit, 401, envelope(ErrorCode.ApiKeyInvalid, 'bad key'))).toMatchObject({
      kind: 'batchStop',
      details: { reason: BatchStopReason.ApiKeyInvalid, message: 'bad key' },
    });
    expect(classify(RequestKind.Submit, 403, '<html>forbidden</html>')).toMatchObject({
      kind: 'batchStop',
      details: { reason: BatchStopReason.AccountDisabled, httpStatus: 403 },
    });
  });

  it.each([ErrorCode.RateLimit, ErrorCode.QuotaExceeded])('429 %s waits Retry-After with the same key', (code) => {
    const body = envelope(
      code,
      'slow down',
      code === ErrorCode.QuotaExceeded ? { scope: 'account', reason: 'concurrency_limit', limit: 8 } : undefined,
    );
    expect(classify(RequestKind.Submit, 429, body, { 'retry-after': '4' })).toEqual({
      kind: 'rateLimited',
      httpStatus: 429,
      code,
      message: 'slow down',
      retryAfterMs: 4000,
      ...(code === ErrorCode.QuotaExceeded ? { scope: 'account', reason: 'concurrency_limit' } : {}),
    });
  });

  it('429 with a date, a missing or a garbage Retry-After', () => {
    const body = envelope(ErrorCode.RateLimit);
    expect(classify(RequestKind.Submit, 429, body, { 'retry-after': 'Sat, 21 Nov 2026 10:00:02 GMT' })).toMatchObject({
      retryAfterMs: 2000,
    });
    expect(classify(RequestKind.Submit, 429, body)).toMatchObject({ retryAfterMs: 1000 });
    expect(classify(RequestKind.Submit, 429, body, { 'retry-after': 'later' })).toMatchObject({ retryAfterMs: 1000 });
    expect(classify(RequestKind.Submit, 429, 'Too Many Requests')).toMatchObject({
      kind: 'rateLimited',
      code: 'HTTP_429',
    });
  });

  it('500 ERR_INTERNAL is ambiguous', () => {
    expect(classify(RequestKind.Submit, 500, envelope(ErrorCode.Internal, 'oops'))).toEqual({
      kind: 'ambiguous',
      httpStatus: 500,
      lastError: 'HTTP 500 ERR_INTERNAL: oops',
    });
  });

  it('502 ERR_GENERATION_FAILED is refunded; 503 ERR_PROVIDER_UNAVAILABLE is refunded with its Retry-After', () => {
    expect(classify(RequestKind.Submit, 502, envelope(ErrorCode.GenerationFailed, 'gen'))).toEqual({
      kind: 'refunded',
      details: { httpStatus: 502, code: ErrorCode.GenerationFailed, message: 'gen' },
    });
    expect(
      classify(RequestKind.Submit, 503, envelope(ErrorCode.ProviderUnavailable, 'down'), { 'retry-after': '30' }),
    ).toEqual({
      kind: 'refunded',
      details: { httpStatus: 503, code: ErrorCode.ProviderUnavailable, message: 'down', retryAfterMs: 30_000 },
    });
    expect(classify(RequestKind.Submit, 503, envelope(ErrorCode.ProviderUnavailable))).toMatchObject({
      details: { retryAfterMs: 1000 },
    });
  });

  it("a proxy's 502/503/504 without the service's code leaves the outcome unknown (same key)", () => {
    expect(classify(RequestKind.Submit, 502, '<html>Bad Gateway</html>')).toMatchObject({
      kind: 'ambiguous',
      httpStatus: 502,
    });
    expect(classify(RequestKind.Submit, 503, 'busy', { 'retry-after': '5' })).toMatchObject({
      kind: 'ambiguous',
      retryAfterMs: 5000,
    });
    expect(classify(RequestKind.Submit, 504, '')).toMatchObject({ kind: 'ambiguous', httpStatus: 504 });
    expect(classify(RequestKind.Submit, 409, envelope('ERR_SOMETHING_NEW'))).toMatchObject({ kind: 'ambiguous' });
  });

  it('no response, or a body that did not arrive, is ambiguous with the reason', () => {
    expect(classify(RequestKind.Submit, undefined)).toEqual({ kind: 'ambiguous', lastError: 'no response' });
    expect(
      classifyResponse({
        kind: RequestKind.Submit,
        status: 202,
        headers: {},
        error: 'UND_ERR_BODY_TIMEOUT: Body Timeout Error',
        nowMs: NOW,
        successStatuses: DEFAULT_SUCCESS_STATUSES,
        costFields: DEFAULT_COST_FIELDS,
        priceFields: DEFAULT_PRICE_FIELDS,
        defaultRetryAfterMs: 1000,
      }),
    ).toEqual({ kind: 'ambiguous', httpStatus: 202, lastError: 'HTTP 202: UND_ERR_BODY_TIMEOUT: Body Timeout Error' });
  });

  it('no response with nothing sent (a connect-phase error) is notSent, for every kind of request', () => {
    const base = {
      nowMs: NOW,
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      defaultRetryAfterMs: 1000,
    };
    const refused = 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9';
    for (const kind of Object.values(RequestKind)) {
      expect(classifyResponse({ kind, error: refused, notSent: true, ...base })).toEqual({
        kind: 'notSent',
        lastError: refused,
      });
      // Without the proof, the same words stay unknown.
      expect(classifyResponse({ kind, error: refused, ...base })).toEqual({ kind: 'ambiguous', lastError: refused });
    }
    // Once headers arrived something was sent, whatever the flag says.
    expect(
      classifyResponse({ kind: RequestKind.Submit, status: 202, headers: {}, error: refused, notSent: true, ...base }),
    ).toMatchObject({ kind: 'ambiguous', httpStatus: 202 });
  });

  it('a notSent outcome is an Unreachable failure: retried with the same key, never an unknown outcome', () => {
    const failure = toApplicationFailure({ kind: 'notSent', lastError: 'ENOTFOUND: getaddrinfo ENOTFOUND x' }, 2000);
    expect([failure.type, failure.nonRetryable, failure.nextRetryDelay]).toEqual([
      FailureType.Unreachable,
      false,
      2000,
    ]);
    expect(failure.message).toMatch(/not sent/);
  });

  it('reads each field of a creation on its own: a wrong type leaves that field out, not the others', () => {
    expect(classify(RequestKind.Submit, 202, { id: 'cr_1', status: 7, cost_usd: {} })).toEqual({
      kind: 'accepted',
      creationId: 'cr_1',
      status: 'accepted',
    });
    expect(classify(RequestKind.Poll, 200, { status: 'failed', error: { code: 'E', message: 'No image' } })).toEqual({
      kind: 'ended',
      result: { outcome: 'failed', status: 'failed', error: '{"code":"E","message":"No image"}', retryable: false },
    });
    // An id longer than any real one is not taken as one: the same key will ask again.
    expect(classify(RequestKind.Submit, 202, { id: 'x'.repeat(1025) })).toMatchObject({ kind: 'ambiguous' });
  });

  it('copies at most 500 characters of any text and 20 field errors from a body', () => {
    const errors = Array.from({ length: 50 }, (_, i) => ({ field: `f${i}`, message: 'm'.repeat(10_000) }));
    const out = classify(RequestKind.Submit, 400, envelope('E'.repeat(10_000), 'é'.repeat(10_000), { errors }));
    if (out.kind !== 'rejected') throw new Error(out.kind);
    expect([out.details.code.length, out.details.message.length]).toEqual([500, 500]);
    expect(out.details.fieldErrors).toHaveLength(20);
    expect(out.details.fieldErrors[0]).toEqual({ field: 'f0', message: `${'m'.repeat(497)}...` });
  });

  it('a request past its total deadline is ambiguous, before or after the headers (the same key goes again)', () => {
    const timedOut = `REQUEST_TIMEOUT: ${new RequestTimeoutError(60_000).message}`;
    const base = {
      nowMs: NOW,
      successStatuses: DEFAULT_SUCCESS_STATUSES,
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      defaultRetryAfterMs: 1000,
    };
    for (const kind of Object.values(RequestKind)) {
      expect(classifyResponse({ kind, error: timedOut, ...base })).toEqual({ kind: 'ambiguous', lastError: timedOut });
      expect(classifyResponse({ kind, status: 202, headers: {}, error: timedOut, ...base })).toEqual({
        kind: 'ambiguous',
        httpStatus: 202,
        lastError: `HTTP 202: ${timedOut}`,
      });
    }
    const failure = toApplicationFailure({ kind: 'ambiguous', lastError: timedOut }, 2000);
    expect([failure.type, failure.nonRetryable]).toEqual([FailureType.Ambiguous, false]);
  });

  it('every documented error code has an outcome for a submission', () => {
    const expected: Record<string, Outcome['kind']> = {
      ERR_INVALID_REQUEST: 'rejected',
      ERR_CONTENT_POLICY: 'rejected',
      ERR_API_KEY_INVALID: 'batchStop',
      ERR_INSUFFICIENT_BALANCE: 'batchStop',
      ERR_MODEL_NOT_FOUND: 'rejected',
      ERR_NOT_FOUND: 'rejected',
      ERR_RATE_LIMIT: 'rateLimited',
      ERR_QUOTA_EXCEEDED: 'rateLimited',
      ERR_INTERNAL: 'ambiguous',
      ERR_GENERATION_FAILED: 'refunded',
      ERR_PROVIDER_UNAVAILABLE: 'refunded',
    };
    for (const [code, status] of Object.entries(HTTP_STATUS_OF)) {
      expect(classify(RequestKind.Submit, status, envelope(code)).kind, code).toBe(expected[code]);
    }
  });
});

describe('classifyResponse: poll', () => {
  it.each(DEFAULT_SUCCESS_STATUSES)('status %s has succeeded, with its images', (status) => {
    const record = {
      id: 'c',
      status,
      cost_usd: 0.04,
      images: [{ url: 'http://files/c-0.png', width: 64, height: 64 }, { nope: 1 }],
    };
    expect(classify(RequestKind.Poll, 200, record)).toEqual({
      kind: 'ended',
      result: {
        outcome: 'succeeded',
        status,
        costUsd: 0.04,
        images: [{ url: 'http://files/c-0.png', width: 64, height: 64, source: 'images[0].url' }],
      },
    });
  });

  it('success statuses are configurable and case-insensitive', () => {
    const out = classifyResponse({
      kind: RequestKind.Poll,
      status: 200,
      headers: {},
      body: JSON.stringify({ id: 'c', status: 'FINISHED' }),
      nowMs: NOW,
      successStatuses: ['finished'],
      costFields: DEFAULT_COST_FIELDS,
      priceFields: DEFAULT_PRICE_FIELDS,
      defaultRetryAfterMs: 1000,
    });
    expect(out).toMatchObject({ kind: 'ended', result: { outcome: 'succeeded', status: 'FINISHED', images: [] } });
    expect(classify(RequestKind.Poll, 200, { id: 'c', status: 'FINISHED' })).toEqual({
      kind: 'inFlight',
      status: 'FINISHED',
    });
  });

  it.each(['queued', 'running', 'pending', 'processing', 'something_new'])('status %s is in flight', (status) => {
    expect(classify(RequestKind.Poll, 200, { id: 'c', status })).toEqual({ kind: 'inFlight', status });
  });

  it.each([
    [FailureMessage.SafetyFilter, false],
    [FailureMessage.NoImage, true],
    [FailureMessage.TimedOut, true],
    [FailureMessage.Failed, true],
    ['Something else went wrong.', false],
  ])('failed with %j: retryable %s, reported verbatim', (error, retryable) => {
    expect(classify(RequestKind.Poll, 200, { id: 'c', status: 'failed', error, cost_usd: 0.04 })).toEqual({
      kind: 'ended',
      result: { outcome: 'failed', status: 'failed', costUsd: 0.04, error, retryable },
    });
  });

  it('a failed creation without an error string is not retryable', () => {
    expect(classify(RequestKind.Poll, 200, { id: 'c', status: 'failed' })).toMatchObject({
      result: { outcome: 'failed', error: '', retryable: false },
    });
  });

  it('malformed JSON or no status is malformed; 404 is not found; 429 and 503 wait; 5xx and transport are ambiguous', () => {
    expect(classify(RequestKind.Poll, 200, '{"status": ')).toMatchObject({ kind: 'malformed', httpStatus: 200 });
    expect(classify(RequestKind.Poll, 200, { id: 'c' })).toMatchObject({ kind: 'malformed' });
    expect(classify(RequestKind.Poll, 404, envelope(ErrorCode.NotFound, 'nope'))).toEqual({
      kind: 'notFound',
      httpStatus: 404,
      code: ErrorCode.NotFound,
      message: 'nope',
    });
    expect(classify(RequestKind.Poll, 429, envelope(ErrorCode.RateLimit), { 'retry-after': '2' })).toMatchObject({
      kind: 'rateLimited',
      retryAfterMs: 2000,
    });
    expect(
      classify(RequestKind.Poll, 503, envelope(ErrorCode.ProviderUnavailable), { 'retry-after': '3' }),
    ).toMatchObject({
      kind: 'rateLimited',
      retryAfterMs: 3000,
    });
    expect(classify(RequestKind.Poll, 500, envelope(ErrorCode.Internal))).toMatchObject({ kind: 'ambiguous' });
    expect(classify(RequestKind.Poll, 502, 'bad gateway')).toMatchObject({ kind: 'ambiguous' });
    expect(classify(RequestKind.Poll, undefined)).toMatchObject({ kind: 'ambiguous' });
    expect(classify(RequestKind.Poll, 400, envelope(ErrorCode.InvalidRequest))).toMatchObject({ kind: 'malformed' });
  });

  describe("404 (issue #13, point 7): lost only with the service's ERR_NOT_FOUND code", () => {
    it('the error envelope with ERR_NOT_FOUND is not found (the creation is lost)', () => {
      expect(classify(RequestKind.Poll, 404, envelope(ErrorCode.NotFound, 'no such creation'))).toEqual({
        kind: 'notFound',
        httpStatus: 404,
        code: ErrorCode.NotFound,
        message: 'no such creation',
      });
    });

    it.each([
      [
        'an HTML page (a proxy)',
        '<html><body><h1>404 Not Found</h1></body></html>',
        'HTTP_404',
        '<html><body><h1>404 Not Found</h1></body></html>',
      ],
      ['plain text', 'Not Found', 'HTTP_404', 'Not Found'],
      ['an empty body', '', 'HTTP_404', 'HTTP 404 with an empty body'],
      ['JSON without the envelope', { detail: 'not found' }, 'HTTP_404', '{"detail":"not found"}'],
      [
        'an envelope with another code',
        envelope(ErrorCode.ModelNotFound, 'no such model'),
        ErrorCode.ModelNotFound,
        'no such model',
      ],
      ['an envelope with a code in another case', envelope('err_not_found', 'x'), 'err_not_found', 'x'],
    ])('%s is an unknown outcome, flagged as an unrecognised 404', (_what, body, code, message) => {
      expect(classify(RequestKind.Poll, 404, body)).toEqual({
        kind: 'ambiguous',
        httpStatus: 404,
        lastError: `HTTP 404 ${code}: ${message}`,
        unrecognizedNotFound: true,
      });
    });

    it('an unrecognised 404 stays bounded however long its body', () => {
      const out = classify(RequestKind.Poll, 404, envelope('E'.repeat(10_000), 'm'.repeat(10_000)));
      if (out.kind !== 'ambiguous') throw new Error(out.kind);
      expect(out.unrecognizedNotFound).toBe(true);
      expect(out.lastError).toBe(`HTTP 404 ${'E'.repeat(497)}...: ${'m'.repeat(497)}...`);
    });

    it('a 404 to a submission is unchanged: rejected, with or without the envelope', () => {
      expect(classify(RequestKind.Submit, 404, envelope(ErrorCode.NotFound, 'nope'))).toEqual({
        kind: 'rejected',
        details: { httpStatus: 404, code: ErrorCode.NotFound, message: 'nope', fieldErrors: [] },
      });
      expect(classify(RequestKind.Submit, 404, '<html>404</html>')).toEqual({
        kind: 'rejected',
        details: {
          httpStatus: 404,
          code: 'HTTP_404',
          message: '<html>404</html> (no error envelope: check IMAGEGEN_BASE_URL and IMAGEGEN_SUBMIT_PATH)',
          fieldErrors: [],
        },
      });
    });

    it('only a poll sets the flag: other ambiguous outcomes do not carry it', () => {
      for (const out of [
        classify(RequestKind.Poll, 500, envelope(ErrorCode.Internal)),
        classify(RequestKind.Poll, 502, 'bad gateway'),
        classify(RequestKind.Submit, 500, 'oops'),
        classify(RequestKind.Poll, undefined),
      ]) {
        expect(out).toMatchObject({ kind: 'ambiguous' });
        expect(out).not.toHaveProperty('unrecognizedNotFound');
      }
    });
  });
});

describe('classifyResponse: models', () => {
  const models = [{ id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04, extra: 1 }, { id: 'sdxl' }, { name: 'no id' }];
  const expected = [{ id: 'flux-dev', name: 'Flux Dev', priceUsd: 0.04 }, { id: 'sdxl' }];
  it.each([
    ['root', models],
    ['data', { data: models }],
    ['models', { models }],
    ['items', { items: models, next: null }],
  ])('reads the list at the %s', (_where, body) => {
    expect(classify(RequestKind.Models, 200, body)).toEqual({ kind: 'models', models: expected });
  });
  it('a body without a list is malformed', () => {
    expect(classify(RequestKind.Models, 200, { data: 'x' })).toMatchObject({ kind: 'malformed' });
    expect(classify(RequestKind.Models, 200, 'not json')).toMatchObject({ kind: 'malformed' });
  });
});

describe('toApplicationFailure', () => {
  it('maps each failing outcome to its type, retryability, delay and details', () => {
    const cases: [Parameters<typeof toApplicationFailure>[0], number | undefined, string, boolean, unknown][] = [
      [
        { kind: 'rateLimited', httpStatus: 429, code: 'ERR_RATE_LIMIT', message: 'm', retryAfterMs: 2000 },
        undefined,
        FailureType.RateLimited,
        false,
        2000,
      ],
      [{ kind: 'ambiguous', lastError: 'reset' }, 1500, FailureType.Ambiguous, false, 1500],
      [{ kind: 'ambiguous', lastError: 'busy', retryAfterMs: 5000 }, 1500, FailureType.Ambiguous, false, 5000],
      [{ kind: 'malformed', lastError: 'x' }, 700, FailureType.Malformed, false, 700],
      [{ kind: 'inFlight', status: 'running' }, 2000, FailureType.Pending, false, 2000],
      [
        { kind: 'refunded', details: { httpStatus: 503, code: 'c', message: 'm', retryAfterMs: 9000 } },
        undefined,
        FailureType.Refunded,
        true,
        undefined,
      ],
      [
        { kind: 'rejected', details: { httpStatus: 400, code: 'c', message: 'm', fieldErrors: [] } },
        undefined,
        FailureType.Rejected,
        true,
        undefined,
      ],
      [
        { kind: 'batchStop', details: { reason: 'api_key_invalid', httpStatus: 401, message: 'm' } },
        undefined,
        FailureType.BatchStop,
        true,
        undefined,
      ],
      [
        { kind: 'notFound', httpStatus: 404, code: 'ERR_NOT_FOUND', message: 'm' },
        undefined,
        FailureType.CreationNotFound,
        true,
        undefined,
      ],
      [
        { kind: 'unknown', details: { idempotencyKey: 'k', tries: 6, lastError: 'e' } },
        undefined,
        FailureType.Unknown,
        true,
        undefined,
      ],
      [{ kind: 'config', message: 'bad key format' }, undefined, FailureType.Config, true, undefined],
    ];
    for (const [outcome, delay, type, nonRetryable, nextRetryDelay] of cases) {
      const f = toApplicationFailure(outcome, delay);
      expect(f.type, outcome.kind).toBe(type);
      expect(f.nonRetryable, outcome.kind).toBe(nonRetryable);
      expect(f.nextRetryDelay ?? undefined, outcome.kind).toBe(nextRetryDelay);
    }
    const refund = toApplicationFailure({
      kind: 'refunded',
      details: { httpStatus: 503, code: 'c', message: 'm', retryAfterMs: 9000 },
    });
    expect(refund.details).toEqual([{ httpStatus: 503, code: 'c', message: 'm', retryAfterMs: 9000 }]);
    const unknown = toApplicationFailure({
      kind: 'unknown',
      details: { idempotencyKey: 'k', tries: 6, lastError: 'e' },
    });
    expect(unknown.details).toEqual([{ idempotencyKey: 'k', tries: 6, lastError: 'e' }]);
  });

  it('an ambiguous outcome carries the unrecognised-404 flag into its details, and only when set', () => {
    const flagged = toApplicationFailure(
      { kind: 'ambiguous', httpStatus: 404, lastError: 'HTTP 404 HTTP_404: Not Found', unrecognizedNotFound: true },
      1500,
    );
    expect([flagged.type, flagged.nonRetryable, flagged.nextRetryDelay]).toEqual([FailureType.Ambiguous, false, 1500]);
    expect(flagged.details).toEqual([
      { lastError: 'HTTP 404 HTTP_404: Not Found', httpStatus: 404, unrecognizedNotFound: true },
    ]);
    const plain = toApplicationFailure({ kind: 'ambiguous', httpStatus: 500, lastError: 'HTTP 500 ERR_INTERNAL: x' });
    expect(plain.details).toEqual([{ lastError: 'HTTP 500 ERR_INTERNAL: x', httpStatus: 500 }]);
  });
});
