import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput, type CreateImageResult } from '../../src/model';
import type Database from 'better-sqlite3';
import { SQLITE_MODULE } from '../../src/ledger/sqlite';
import type { LedgerStore } from '../../src/ledger';
import { tempLedger, tempLedgerFile } from '../helpers/ledger';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { activitiesFor, runActivity } from './helpers';

/**
 * createImage consults the ledger store before it sends anything: the memory of what was paid that outlives Temporal
 * (a row run again after the retention starts with no heartbeat details) and the service's idempotency window.
 */
let stub: StubServer | undefined;
let root: string | undefined;
let ledger: LedgerStore | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
  await ledger?.close();
  ledger = undefined;
  if (root) await rm(root, { recursive: true, force: true });
  root = undefined;
});

const HOUR = 3_600_000;

function input(extra: Partial<CreateImageInput> = {}): CreateImageInput {
  return {
    idempotencyKey: 'ib/b/r/a1',
    request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    batchId: 'b',
    rowId: 'r',
    outDir: 'out',
    maxPollWaitMs: 30 * 60_000,
    ...extra,
  };
}

/**
 * A service that accepts (202, cr_1), or answers 500 when `silent`; polls say succeeded with one image on the same
 * server. Each submission notes whether the store's file, read by a connection of its own, already held its key
 * (committed) when it arrived.
 */
async function service(file: string, options: { silent?: boolean; first429?: boolean; first401?: boolean } = {}) {
  const ledgerAtRequest: boolean[] = [];
  let posts = 0;
  stub = await startStub((req) => {
    if (req.method === 'POST' && options.first401 && posts++ === 0) {
      return { status: 401, body: { error: { code: 'ERR_UNAUTHORIZED', message: 'bad key' } } };
    }
    if (req.method === 'POST' && options.first429 && posts++ === 0) {
      return {
        status: 429,
        headers: { 'retry-after': '7200' },
        body: { error: { code: 'ERR_RATE_LIMITED', message: 'slow down' } },
      };
    }
    if (req.method === 'POST') {
      // The module the store itself loads on this Node.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const Sqlite = require(SQLITE_MODULE) as typeof Database;
      const reader = new Sqlite(file, { readonly: true });
      try {
        const sql = 'SELECT 1 AS found FROM ledger_keys WHERE idempotency_key = ?';
        ledgerAtRequest.push(reader.prepare(sql).get(req.headers['idempotency-key']) !== undefined);
      } finally {
        reader.close();
      }
      if (options.silent) return { status: 500, body: { error: { code: 'ERR_INTERNAL', message: 'try again' } } };
      return { status: 202, body: { id: 'cr_1', status: 'queued', cost_usd: 0.04 } };
    }
    if (req.url.includes('/img/')) {
      return {
        status: 200,
        headers: { 'content-type': 'image/png' },
        body: Buffer.from('89504e470d0a1a0a706e672d6279746573', 'hex'),
      };
    }
    return {
      status: 200,
      body: { id: 'cr_1', status: 'succeeded', cost_usd: 0.04, images: [{ url: `${stub!.url}/img/0.png` }] },
    };
  });
  return { url: `${stub.url}`, ledgerAtRequest };
}

/** Attempts as Temporal would make them: each after the previous one's delay, with its last heartbeat details. */
async function drive(run: () => Promise<CreateImageResult>, clock: { t: number }) {
  let details: unknown;
  for (let n = 0; n < 40; n++) {
    const r = await runActivity(run, details === undefined ? {} : { heartbeatDetails: details });
    details = r.heartbeats.at(-1) ?? details;
    if (r.value) return { value: r.value };
    const f = r.failure!;
    if (f.nonRetryable) return { failure: f };
    clock.t += typeof f.nextRetryDelay === 'number' ? f.nextRetryDelay : 1_000;
  }
  throw new Error('createImage never ended');
}

async function setup(
  options: {
    silent?: boolean;
    first429?: boolean;
    first401?: boolean;
    config?: Parameters<typeof activitiesFor>[1];
  } = {},
) {
  root = await mkdtemp(path.join(tmpdir(), 'imagebatch-journal-'));
  const file = tempLedgerFile();
  ledger = await tempLedger(file);
  const s = await service(file, options);
  const made = activitiesFor(
    s.url,
    { minPollIntervalMs: 1_000, maxAmbiguousTries: 2, ...options.config },
    { outputRoot: root, ledger },
  );
  // The same clock for the activities and the tests.
  const clock = made.clock;
  return { ...s, ...made, clock, posts: () => stub!.requests.filter((r) => r.method === 'POST').length };
}

describe('createImage and the ledger', () => {
  it('commits the key to the store before its request leaves; then its acceptance and its end', async () => {
    const t = await setup();
    const ended = await drive(() => t.activities.createImage(input()), t.clock);
    expect(ended.value?.outcome).toBe('succeeded');
    expect(t.ledgerAtRequest).toEqual([true]);
    const key = await ledger!.key('ib/b/r/a1');
    expect(key).toMatchObject({ creationId: 'cr_1', costUsd: 0.04, ended: { outcome: 'succeeded' } });
    expect(key?.ended?.images).toHaveLength(1);
  });

  it('a row run again after Temporal forgot it: a saved success is answered from the ledger, no request at all', async () => {
    const t = await setup();
    const first = await drive(() => t.activities.createImage(input()), t.clock);
    const before = stub!.requests.length;
    // A new run: no heartbeat details, a day later.
    t.clock.t += 25 * HOUR;
    const again = await drive(() => t.activities.createImage(input()), t.clock);
    expect(again.value).toEqual(first.value);
    expect(stub!.requests.length).toBe(before);
  });

  it('an accepted key run again (images gone) follows its creation and saves them: no new submission', async () => {
    const t = await setup();
    await drive(() => t.activities.createImage(input()), t.clock);
    await rm(path.join(root!, 'out', 'r'), { recursive: true, force: true });
    t.clock.t += 25 * HOUR;
    const again = await drive(() => t.activities.createImage(input()), t.clock);
    expect(again.value?.outcome).toBe('succeeded');
    expect(t.posts()).toBe(1);
  });

  it('a key never answered is sent again with the same key within the idempotency window, never after it', async () => {
    const t = await setup({ silent: true });
    const first = await drive(() => t.activities.createImage(input()), t.clock);
    expect(first.failure?.type).toBe(FailureType.Unknown);
    expect(t.posts()).toBe(2); // maxAmbiguousTries
    // Within the window (23 h later): the same key again, as the service would replay it.
    t.clock.t += 23 * HOUR - 10_000;
    const within = await drive(() => t.activities.createImage(input()), t.clock);
    expect(within.failure?.type).toBe(FailureType.Unknown);
    expect(t.posts()).toBe(4);
    expect(new Set(stub!.requests.map((r) => r.headers['idempotency-key']))).toEqual(new Set(['ib/b/r/a1']));
    // Past the window (counted from the first send): reported, nothing sent.
    t.clock.t += 2 * HOUR;
    const past = await drive(() => t.activities.createImage(input()), t.clock);
    expect(past.failure?.type).toBe(FailureType.Unknown);
    expect(past.failure?.message).toContain('idempotency window');
    expect(t.posts()).toBe(4);
  });

  it('the window is a setting (IMAGEGEN_IDEMPOTENCY_WINDOW_MS)', async () => {
    const t = await setup({ silent: true, config: { idempotencyWindowMs: HOUR } });
    await drive(() => t.activities.createImage(input()), t.clock);
    t.clock.t += 2 * HOUR;
    const past = await drive(() => t.activities.createImage(input()), t.clock);
    expect(past.failure?.message).toContain('idempotency window (1 h');
    expect(t.posts()).toBe(2);
  });

  it('a key answered only 429 (nothing stored, nothing charged) is sent again after the window (seen: reported unknown)', async () => {
    const t = await setup({ first429: true, config: { idempotencyWindowMs: 30 * 60_000 } });
    const ended = await drive(() => t.activities.createImage(input()), t.clock);
    expect(ended.value?.outcome).toBe('succeeded');
    expect(t.posts()).toBe(2);
  });

  it('a key refused 401 (checked before the look-up: nothing stored) is sent again after a resume past the window', async () => {
    const t = await setup({ first401: true, config: { idempotencyWindowMs: 30 * 60_000 } });
    const stopped = await drive(() => t.activities.createImage(input()), t.clock);
    expect(stopped.failure?.type).toBe(FailureType.BatchStop);
    t.clock.t += 2 * HOUR; // the batch waited for a new key, then was resumed
    const resumed = await drive(() => t.activities.createImage(input()), t.clock);
    expect(resumed.value?.outcome).toBe('succeeded');
    expect(t.posts()).toBe(2);
  });

  it('a key with no known answer counts from the send that may be stored; the window is named in its own unit', async () => {
    const t = await setup({ silent: true, config: { idempotencyWindowMs: 30 * 60_000 } });
    await drive(() => t.activities.createImage(input()), t.clock);
    t.clock.t += 31 * 60_000;
    const past = await drive(() => t.activities.createImage(input()), t.clock);
    expect(past.failure?.message).toContain('idempotency window (30 min');
    expect(t.posts()).toBe(2);
  });

  it('a key the ledger holds with another body is never sent with this one', async () => {
    const t = await setup({ silent: true });
    await drive(() => t.activities.createImage(input()), t.clock);
    const other = await drive(
      () => t.activities.createImage(input({ request: { prompt: 'a different prompt', model: 'flux-dev' } })),
      t.clock,
    );
    expect(other.failure?.type).toBe(FailureType.Unknown);
    expect(other.failure?.message).toContain('with another body');
    expect(t.posts()).toBe(2);
  });
});
