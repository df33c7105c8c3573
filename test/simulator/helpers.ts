import { expect } from 'vitest';
import { request } from 'undici';
import {
  DEMO_API_KEY,
  ManualClock,
  startSimulator,
  type Simulator,
  type SimulatorConfigInput,
} from '../../src/simulator';

export const SECOND_KEY = `img_live_${'B'.repeat(40)}`;
export const OTHER_ACCOUNT_KEY = `img_live_${'C'.repeat(40)}`;
export const PROMPT = 'a lighthouse on a cliff at dusk, oil painting';

/** Two accounts: the demo one with two keys, and another one; a manual clock (a new one by default); generous rate limits. */
export async function startTestSim(
  overrides: SimulatorConfigInput = {},
  clock = new ManualClock(),
): Promise<{ sim: Simulator; clock: ManualClock }> {
  const sim = await startSimulator({
    accounts: [
      {
        id: 'acct_demo',
        keys: [
          { id: 'key_demo', key: DEMO_API_KEY },
          { id: 'key_second', key: SECOND_KEY },
        ],
      },
      { id: 'acct_other', models: ['sdxl'], keys: [{ id: 'key_other', key: OTHER_ACCOUNT_KEY }] },
    ],
    sweepIntervalMs: 0,
    ...overrides,
    limits: { requestsPerSecond: 1000, burst: 1000, ...overrides.limits },
    generation: {
      queuedMs: { minMs: 1000, maxMs: 1000 },
      runningMs: { minMs: 3000, maxMs: 3000 },
      ...overrides.generation,
    },
    clock,
  });
  return { sim, clock };
}

/** The fields tests read from any JSON reply; which ones are really present is what the assertions check. */
export interface Body {
  id: string;
  status: string;
  error: {
    code: string;
    message: string;
    details: { errors: { field: string; message: string }[] } & Record<string, unknown>;
  } & string;
  images: { url: string; width: number; height: number }[];
  created_at: string;
  updated_at: string;
  detail: string;
  data: unknown[];
  entries: unknown[];
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Body;
}

export interface CallOptions {
  /** The key to send; null sends none. @default DEMO_API_KEY */
  key?: string | null;
  /** @default 'bearer' */
  via?: 'bearer' | 'x-api-key';
  /** JSON-encoded unless `raw` is given. */
  json?: unknown;
  raw?: string | Buffer;
  /** @default 'application/json' when a body is sent */
  contentType?: string | null;
  idempotencyKey?: string;
  headers?: Record<string, string>;
}

export async function call(
  sim: Simulator,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  options: CallOptions = {},
): Promise<Reply> {
  const key = options.key === undefined ? DEMO_API_KEY : options.key;
  const headers: Record<string, string> = { ...options.headers };
  if (key !== null) {
    if (options.via === 'x-api-key') headers['x-api-key'] = key;
    else headers.authorization = `Bearer ${key}`;
  }
  const body = options.raw ?? (options.json !== undefined ? JSON.stringify(options.json) : undefined);
  if (body !== undefined && options.contentType !== null)
    headers['content-type'] = options.contentType ?? 'application/json';
  if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
  const url = path.startsWith('http') ? path : `${sim.baseUrl}${path}`;
  const res = await request(url, { method, headers, body });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.statusCode, headers: res.headers, body: parsed as Body };
}

export function submit(sim: Simulator, json: unknown, options: CallOptions = {}): Promise<Reply> {
  return call(sim, 'POST', '/creations', { ...options, json });
}

/** Asserts the error envelope with an exact code and status. */
export function expectError(reply: Reply, status: number, code: string): void {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body).toMatchObject({
    error: { code, message: expect.any(String) as unknown, details: expect.any(Object) as unknown },
  });
}

/** Every 429 and 503 carries Retry-After in whole seconds >= 1. */
export function expectRetryAfter(reply: Reply): number {
  const value = reply.headers['retry-after'];
  expect(typeof value).toBe('string');
  const seconds = Number(value);
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeGreaterThanOrEqual(1);
  return seconds;
}

/** The charge book's invariants every scenario must keep, and no handler crash. */
export function expectChargesConsistent(sim: Simulator): void {
  const v = sim.charges.violations();
  expect(v.chargedTwice).toEqual([]);
  expect(v.overchargedCreations).toEqual([]);
  expect(v.unrefundedFailures).toEqual([]);
  expect(v.chargesWithoutCreation).toEqual([]);
  expect(sim.unexpectedErrors()).toEqual([]);
}

/** Net USD charged to a key according to the charge book. */
export function netCharged(sim: Simulator, keyId = 'key_demo'): number {
  return sim.charges.byKey().find((k) => k.keyId === keyId)?.netUsd ?? 0;
}
