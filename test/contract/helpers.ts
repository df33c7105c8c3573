import { mkdtempSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import { Pool, type Dispatcher } from 'undici';
import { expect } from 'vitest';
import { createActivitiesWithSteps, type StepActivities as Activities } from '../../src/activities';
import { defaultServiceConfig } from '../../src/config/service-config';
import { type AuthHeaderStyle, type ServiceConfig } from '../../src/api/service-config';
import {
  DEMO_API_KEY,
  ManualClock,
  startSimulator,
  type IdempotencyVariant,
  type Simulator,
  type SimulatorConfigInput,
} from '../../src/simulator';
import { lazyTempLedger } from '../helpers/ledger';

/**
 * Contract tests: the real activities against the real simulator over loopback HTTP, both on one manual
 * clock, so that nothing waits in real time. Every failure and every log line the activities produce is
 * kept, so that each file can prove the API key never appears in any of them.
 */

export const MAIN_ACCOUNT = 'acct_demo';
export const MAIN_KEY_ID = 'key_demo';
export const MAIN_KEY = DEMO_API_KEY;
/** A key of the main account's second key, for showing that keys share nothing but the account. */
export const OTHER_ACCOUNT = 'acct_other';
export const OTHER_ACCOUNT_KEY = `img_live_${'Q'.repeat(20)}${'r'.repeat(20)}`;

export const VARIANTS: readonly IdempotencyVariant[] = ['accepted-only', 'all-judged'];
export const AUTH_STYLES: readonly AuthHeaderStyle[] = ['bearer', 'x-api-key'];
export const NAMINGS = ['default', 'alternate'] as const;

/** Every plaintext key a test may hand to the activities: none of them may appear in any output. */
const KNOWN_KEYS = new Set<string>([MAIN_KEY, OTHER_ACCOUNT_KEY]);

/** A syntactically valid key, unique per `tag`, registered as one the activities might leak. */
export function makeKey(tag: string): string {
  const token = `${tag.replace(/[^A-Za-z0-9]/g, '')}${'x'.repeat(40)}`.slice(0, 40);
  const key = `img_live_${token}`;
  KNOWN_KEYS.add(key);
  return key;
}

/** A simulator on a manual clock, with deterministic timings, no random safety declines and no sweeper. */
export async function startContractSim(
  overrides: SimulatorConfigInput = {},
): Promise<{ sim: Simulator; clock: ManualClock }> {
  const clock = new ManualClock();
  const sim = await startSimulator({
    accounts: [
      { id: MAIN_ACCOUNT, keys: [{ id: MAIN_KEY_ID, key: MAIN_KEY }] },
      { id: OTHER_ACCOUNT, keys: [{ id: 'key_other', key: OTHER_ACCOUNT_KEY }] },
    ],
    sweepIntervalMs: 0,
    limits: { requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
    generation: { queuedMs: { minMs: 1000, maxMs: 1000 }, runningMs: { minMs: 3000, maxMs: 3000 } },
    safety: { genericDeclineProbability: 0 },
    ...overrides,
    clock,
  });
  return { sim, clock };
}

export interface Run<T> {
  value?: T;
  failure?: ApplicationFailure;
  heartbeats: unknown[];
}

type ActivityName = {
  [K in keyof Activities]: Activities[K] extends (...args: never[]) => Promise<unknown> ? K : never;
}[keyof Activities];

export interface Harness {
  activities: Activities;
  config: ServiceConfig;
  /** Runs one activity in a mock activity context (with the given info, e.g. previous heartbeat details). */
  run<K extends ActivityName>(
    name: K,
    args: Parameters<Activities[K]>,
    info?: Partial<Info>,
  ): Promise<Run<Awaited<ReturnType<Activities[K]>>>>;
}

/** Everything the activities produced, across every harness of the test process. */
const produced = { failures: [] as ApplicationFailure[], logs: [] as LogEntry[], values: [] as unknown[] };

/**
 * The real activities, wired as the brief says: the simulator's base URL, the key, the simulator's clock and a
 * temporary output folder. Logs go to the Temporal activity logger of the mock environment, which keeps them.
 */
export function harness(
  sim: Simulator,
  clock: ManualClock,
  options: {
    authHeader: AuthHeaderStyle;
    key?: string;
    outputRoot?: string;
    config?: Partial<ServiceConfig>;
    dispatcher?: Dispatcher;
  },
): Harness {
  const key = options.key ?? MAIN_KEY;
  KNOWN_KEYS.add(key);
  const config = defaultServiceConfig({
    baseUrl: sim.baseUrl,
    authHeader: options.authHeader,
    backoffBaseMs: 1000,
    backoffMaxMs: 60_000,
    ...options.config,
  });
  const activities = createActivitiesWithSteps({
    config,
    apiKey: () => key,
    now: () => clock.now(),
    // A folder of its own: what one run of these tests writes (the ledger above all) never answers the next run's
    // keys (seen: the second run of the suite on one machine, Node 24 after Node 20, read the first one's ledger).
    outputRoot: options.outputRoot ?? mkdtempSync(path.join(tmpdir(), 'imagebatch-contract-')),
    random: () => 0.5,
    ledger: lazyTempLedger(),
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
  });
  const logger = new DefaultLogger('TRACE', (entry) => produced.logs.push(entry));
  return {
    activities,
    config,
    async run<K extends ActivityName>(name: K, args: Parameters<Activities[K]>, info: Partial<Info> = {}) {
      const env = new MockActivityEnvironment(info, { logger });
      const heartbeats: unknown[] = [];
      env.on('heartbeat', (d: unknown) => heartbeats.push(d));
      type Result = Awaited<ReturnType<Activities[K]>>;
      const fn = activities[name] as (...a: Parameters<Activities[K]>) => Promise<Result>;
      try {
        const value = await env.run<Parameters<Activities[K]>, Result, typeof fn>(fn, ...args);
        produced.values.push(value);
        return { value, heartbeats };
      } catch (err) {
        if (err instanceof ApplicationFailure) {
          produced.failures.push(err);
          return { failure: err, heartbeats };
        }
        throw err;
      }
    },
  };
}

/** A failure as text: everything a workflow, a log or a result file could ever show of it. */
export function failureText(f: ApplicationFailure): string {
  return JSON.stringify({
    name: f.name,
    type: f.type,
    message: f.message,
    nonRetryable: f.nonRetryable,
    nextRetryDelay: retryDelayOf({ failure: f, heartbeats: [] }),
    details: f.details,
    stack: f.stack,
    cause: f.cause ? String(f.cause) : undefined,
  });
}

/** Asserts that no key (nor its 40-character token) appears in any failure, log line or result so far. */
export function expectNoKeyLeak(): { failures: number; logs: number } {
  const texts = [
    ...produced.failures.map(failureText),
    ...produced.logs.map((l) => JSON.stringify({ message: l.message, meta: l.meta })),
    ...produced.values.map((v) => JSON.stringify(v)),
  ];
  for (const key of KNOWN_KEYS) {
    const token = key.slice(key.indexOf('live_') + 'live_'.length);
    for (const text of texts) {
      expect(text.includes(key), 'an API key appears in an output').toBe(false);
      expect(text.includes(token), 'an API key token appears in an output').toBe(false);
    }
  }
  return { failures: produced.failures.length, logs: produced.logs.length };
}

/** The charge book's invariants every scenario must keep, and no simulator handler crash. */
export function expectChargesConsistent(sim: Simulator): void {
  const v = sim.charges.violations();
  expect(v.chargedTwice).toEqual([]);
  expect(v.overchargedCreations).toEqual([]);
  expect(v.unrefundedFailures).toEqual([]);
  expect(v.chargesWithoutCreation).toEqual([]);
  expect(sim.unexpectedErrors()).toEqual([]);
}

/** The charge book's summary of one idempotency key (undefined: nothing was ever charged under it). */
export function chargesOf(sim: Simulator, idempotencyKey: string, accountId = MAIN_ACCOUNT) {
  return sim.charges.byIdempotencyKey().find((s) => s.idempotencyKey === idempotencyKey && s.accountId === accountId);
}

/** The failure's `nextRetryDelay` in milliseconds (0 when it has none). */
export function retryDelayOf(run: Run<unknown>): number {
  const delay: unknown = run.failure?.nextRetryDelay;
  return typeof delay === 'number' ? delay : 0;
}

/** Asserts the failure's type and retryability and returns its first detail. */
export function expectFailure<T = Record<string, unknown>>(
  run: Run<unknown>,
  type: string,
  nonRetryable: boolean,
): T & Record<string, unknown> {
  expect(run.value, `expected ${type}, got a value`).toBeUndefined();
  expect(run.failure?.type, run.failure?.message).toBe(type);
  expect(run.failure?.nonRetryable).toBe(nonRetryable);
  return run.failure?.details?.[0] as T & Record<string, unknown>;
}

/** A loopback pool that drops every credential header on the way out (a misconfigured proxy). */
export function credentialStrippingDispatcher(baseUrl: string): Dispatcher {
  const strip: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
    const headers = Object.fromEntries(
      Object.entries((opts.headers ?? {}) as Record<string, string>).filter(
        ([name]) => !['authorization', 'x-api-key'].includes(name.toLowerCase()),
      ),
    );
    return dispatch({ ...opts, headers }, handler);
  };
  return new Pool(new URL(baseUrl).origin).compose(strip);
}

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-contract-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** A request body with a tag that scripts can match on, long enough that the safety filter never guesses. */
export function request(tag: string, extra: Record<string, unknown> = {}) {
  return { prompt: `a watercolour harbour at dawn with fishing boats ${tag}`, model: 'flux-dev', ...extra };
}
