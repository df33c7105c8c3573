import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FailureType,
  KeyOutcome,
  needsReconcile,
  rowMoney,
  RowState,
  type CreateImageInput,
  type CreateImageResult,
} from '../../src/model';
import { keyMayHoldMoney, rowMayBePaid, type LedgerStore } from '../../src/ledger';
import { isUnresolved } from '../../src/results/write';
import { RowRecordBuilder } from '../../src/workflows/row-record';
import { startStub, type StubServer } from '../api/helpers/stub-server';
import { closedPort } from '../helpers/closed-port';
import { tempLedger } from '../helpers/ledger';
import { activitiesFor, runActivity } from './helpers';

/**
 * A key whose sends never left (nothing listens at the base URL: connection refused) is retried as an outage with the
 * same key, then ends `not_sent`: charged nothing, in the store and in the row's record, and the row is not one that
 * "may have been paid".
 */
let ledger: LedgerStore | undefined;
let root: string | undefined;
let stub: StubServer | undefined;
afterEach(async () => {
  await stub?.close();
  await ledger?.close();
  if (root) await rm(root, { recursive: true, force: true });
  stub = undefined;
  ledger = undefined;
  root = undefined;
});

const input = (): CreateImageInput => ({
  idempotencyKey: 'ib/b/r/a1',
  request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
  batchId: 'b',
  rowId: 'r',
  outDir: 'out',
  maxPollWaitMs: 30 * 60_000,
});

/** Runs attempts as Temporal would (each after its `nextRetryDelay`) until one ends the key. */
async function drive(run: () => Promise<CreateImageResult>, clock: { t: number }, before?: () => Promise<void>) {
  let details: unknown;
  const retried: { type: string | null | undefined; delay: unknown }[] = [];
  for (let n = 0; n < 20; n++) {
    if (n === 1) await before?.();
    const r = await runActivity(run, details === undefined ? {} : { heartbeatDetails: details });
    details = r.heartbeats.at(-1) ?? details;
    const f = r.failure;
    if (!f) throw new Error(`createImage ended with ${JSON.stringify(r.value)}`);
    if (f.nonRetryable) return { failure: f, retried };
    retried.push({ type: f.type, delay: f.nextRetryDelay });
    clock.t += typeof f.nextRetryDelay === 'number' ? f.nextRetryDelay : 1_000;
  }
  throw new Error('createImage never ended');
}

async function setup(baseUrl: string) {
  root = await mkdtemp(path.join(tmpdir(), 'imagebatch-not-sent-'));
  ledger = await tempLedger();
  const made = activitiesFor(
    baseUrl,
    { maxAmbiguousTries: 3, backoffBaseMs: 1_000, backoffMaxMs: 4_000 },
    { outputRoot: root, ledger },
  );
  return made;
}

describe('a key whose sends never left', () => {
  it('is retried with the same key as an outage (backoff), then ends not_sent: nothing charged, in the store too', async () => {
    const t = await setup(`http://127.0.0.1:${await closedPort()}/api/public/v1`);
    const ended = await drive(() => t.activities.createImage(input()), t.clock);
    // Backoff from the base, half to full with this jitter (0.5): 750 ms, then 1500 ms.
    expect(ended.retried).toEqual([
      { type: FailureType.Unreachable, delay: 750 },
      { type: FailureType.Unreachable, delay: 1_500 },
    ]);
    expect(ended.failure.type).toBe(FailureType.NotSent);
    expect(ended.failure.message).toMatch(/not sent.*ECONNREFUSED.*IMAGEGEN_BASE_URL/);
    const key = await ledger!.key('ib/b/r/a1');
    expect(key?.ended?.outcome).toBe(KeyOutcome.NotSent);
    expect(key && keyMayHoldMoney(key)).toBe(false);
    const row = (await ledger!.rowsOf('b', ['r'])).get('r');
    expect(row && rowMayBePaid(row)).toBe(false);
  });

  it('a key one of whose sends may have left (a reset after the request was read) ends unknown, not not_sent', async () => {
    stub = await startStub(() => ({ reset: true }));
    const t = await setup(stub.url);
    // The first send is read and reset; then nothing listens any more.
    const ended = await drive(
      () => t.activities.createImage(input()),
      t.clock,
      async () => {
        await stub!.close();
        stub = undefined;
      },
    );
    expect(ended.retried.map((r) => r.type)).toEqual([FailureType.Ambiguous, FailureType.Unreachable]);
    expect(ended.failure.type).toBe(FailureType.Unknown);
    expect((await ledger!.key('ib/b/r/a1'))?.ended?.outcome).toBe(KeyOutcome.Unknown);
  });
});

describe("a not_sent key in the row's record", () => {
  it('charges 0 (known), fails the row safe to submit again, and is neither unresolved nor to reconcile', () => {
    const row = new RowRecordBuilder({ batchId: 'b', rowId: 'r', request: { prompt: 'p', model: 'flux-dev' } });
    row.startKey(1, 'ib/b/r/a1');
    row.notSent('not sent: the service was not reached (ECONNREFUSED)');
    const { record } = row;
    expect(record.keys.map((k) => k.outcome)).toEqual([KeyOutcome.NotSent]);
    expect([record.state, record.chargedUsd, record.netUsd, record.resubmittable]).toEqual([
      RowState.Failed,
      0,
      0,
      true,
    ]);
    expect(rowMoney(record.keys)).toEqual({ chargedUsd: 0, refundedUsd: 0, netUsd: 0 });
    expect(isUnresolved(record.state, record.keys)).toBe(false);
    expect(needsReconcile(record)).toBe(false);
  });
});

describe('a row cancelled while its key had only sends that never left', () => {
  it('recordRow puts the key right from the store (not_sent, charged 0) and writes that record', async () => {
    const t = await setup(`http://127.0.0.1:${await closedPort()}/api/public/v1`);
    // Two tries of the key, both refused before a byte left; then the row is cancelled.
    let details: unknown;
    for (let n = 0; n < 2; n++) {
      const r = await runActivity(
        () => t.activities.createImage(input()),
        details === undefined ? {} : { heartbeatDetails: details },
      );
      expect(r.failure?.type).toBe(FailureType.Unreachable);
      details = r.heartbeats.at(-1) ?? details;
    }
    const row = new RowRecordBuilder({
      batchId: 'b',
      rowId: 'r',
      request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    });
    row.startKey(1, 'ib/b/r/a1');
    row.startKey(2, 'ib/b/r/a2'); // never sent at all: cancelled before its first try
    row.cancelled('cancelled');
    expect(row.record.chargedUsd).toBeNull(); // what the row alone can say
    const corrected = await t.activities.recordRow({ outDir: 'out', record: row.record });
    expect(corrected?.keys.map((k) => k.outcome)).toEqual([KeyOutcome.NotSent, KeyOutcome.NotSent]);
    expect(corrected).toMatchObject({ state: RowState.Cancelled, chargedUsd: 0, netUsd: 0, resubmittable: true });
    expect(isUnresolved(corrected!.state, corrected!.keys)).toBe(false);
    const stored = (await ledger!.rowsOf('b', ['r'])).get('r');
    expect(stored?.record?.keys.map((k) => k.outcome)).toEqual([KeyOutcome.NotSent, KeyOutcome.NotSent]);
  });

  it('a key one send of which may have left stays unknown', async () => {
    stub = await startStub(() => ({ reset: true }));
    const t = await setup(stub.url);
    const r = await runActivity(() => t.activities.createImage(input()));
    expect(r.failure?.type).toBe(FailureType.Ambiguous);
    const row = new RowRecordBuilder({
      batchId: 'b',
      rowId: 'r',
      request: { prompt: 'a lighthouse at dusk', model: 'flux-dev' },
    });
    row.startKey(1, 'ib/b/r/a1');
    row.cancelled('cancelled');
    expect(await t.activities.recordRow({ outDir: 'out', record: row.record })).toBeUndefined();
  });
});
