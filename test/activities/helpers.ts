import { mkdtempSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivitiesWithSteps, type ActivityDeps } from '../../src/activities';
import type { Logger } from '../../src/api/client';
import { defaultServiceConfig } from '../../src/config/service-config';
import { type ServiceConfig } from '../../src/api/service-config';
import { SECRET_KEY } from '../api/helpers/stub-server';
import { lazyTempLedger } from '../helpers/ledger';

/** A logger that keeps every line (message and fields) for assertions. */
export function capturingLogger(): Logger & { lines: { level: string; message: string; meta?: unknown }[] } {
  const lines: { level: string; message: string; meta?: unknown }[] = [];
  const at = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-act-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Activities on a stub server's base URL, with a fixed clock and no jitter randomness. */
export function activitiesFor(
  baseUrl: string,
  overrides: Partial<ServiceConfig> = {},
  deps: Partial<ActivityDeps> = {},
) {
  const logger = capturingLogger();
  const clock = { t: 1_000_000 };
  const activities = createActivitiesWithSteps({
    config: defaultServiceConfig({ baseUrl, ...overrides }),
    apiKey: () => SECRET_KEY,
    now: () => clock.t,
    random: () => 0.5,
    logger,
    // A folder of its own: what one test's activities write (images, the ledger) never answers another's.
    outputRoot: mkdtempSync(path.join(tmpdir(), 'imagebatch-act-')),
    ledger: lazyTempLedger(),
    ...deps,
  });
  return { activities, logger, clock };
}

/** Runs an activity in a mock context with the given previous heartbeat details; records its heartbeats. */
export async function runActivity<T>(
  fn: () => Promise<T>,
  info: { heartbeatDetails?: unknown; attempt?: number; currentAttemptScheduledTimestampMs?: number } = {},
): Promise<{ value?: T; failure?: ApplicationFailure; heartbeats: unknown[] }> {
  const env = new MockActivityEnvironment({ ...info }, { logger: quiet });
  const heartbeats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => heartbeats.push(d));
  try {
    return { value: await env.run(fn), heartbeats };
  } catch (err) {
    if (err instanceof ApplicationFailure) return { failure: err, heartbeats };
    throw err;
  }
}

const quiet = new DefaultLogger('ERROR');

/** A failure of an attempt that Temporal tries again: its type, its delay, and whether it was a local hold. */
export interface RetriedAttempt {
  type?: string | null | undefined;
  delay: number;
  local: boolean;
  message: string;
}

/**
 * Runs attempts of one activity as Temporal's retries would (at most `max`): each after the previous failure's
 * `nextRetryDelay` on `clock`, with the previous attempt's last heartbeat details. Ends with the value, or the failure
 * that is not tried again.
 */
export async function driveAttempts<T>(
  run: () => Promise<T>,
  clock: { t: number },
  options: { max?: number; firstDetails?: unknown } = {},
): Promise<{ value?: T; failure?: ApplicationFailure; failures: RetriedAttempt[]; details: unknown }> {
  let details: unknown = options.firstDetails;
  const failures: RetriedAttempt[] = [];
  for (let n = 0; n < (options.max ?? 60); n++) {
    const r = await runActivity(run, details === undefined ? {} : { heartbeatDetails: details });
    details = r.heartbeats.at(-1) ?? details;
    if (r.value !== undefined) return { value: r.value, failures, details };
    const f = r.failure!;
    if (f.nonRetryable) return { failure: f, failures, details };
    const delay = typeof f.nextRetryDelay === 'number' ? f.nextRetryDelay : 1_000;
    const local = (f.details?.[0] as { local?: boolean } | null)?.local === true;
    failures.push({ type: f.type, delay, local, message: f.message });
    clock.t += delay;
  }
  throw new Error('the activity never ended');
}
