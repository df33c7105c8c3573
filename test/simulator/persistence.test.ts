import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import {
  FaultKind,
  ChargeKind,
  ManualClock,
  SimulatorConfigError,
  STATE_FORMAT,
  STATE_VERSION,
  startSimulator,
  type Simulator,
  type SimulatorConfigInput,
} from '../../src/simulator';
import {
  call,
  expectError,
  expectChargesConsistent,
  netCharged,
  OTHER_ACCOUNT_KEY,
  PROMPT,
  SECOND_KEY,
  startTestSim,
  submit,
} from './helpers';

let dir: string;
let file: string;
const running: Simulator[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-sim-state-'));
  file = path.join(dir, 'state.json');
});

afterEach(async () => {
  for (const sim of running.splice(0)) await sim.close();
  await rm(dir, { recursive: true, force: true });
});

const FLAKY = '[flaky] a harbour at night with fishing boats, watercolour';

/** A simulator on `file` (queued 1 s, running 3 s) with one scripted failure for prompts containing [flaky]. */
async function start(clock: ManualClock, overrides: SimulatorConfigInput = {}): Promise<Simulator> {
  const { sim } = await startTestSim(
    { stateFile: file, scripts: [{ match: '[flaky]', faults: [FaultKind.FailGeneration] }], ...overrides },
    clock,
  );
  running.push(sim);
  return sim;
}

async function stop(sim: Simulator): Promise<void> {
  running.splice(running.indexOf(sim), 1);
  await sim.close();
}

describe('simulator state file', () => {
  it('a restart keeps creations on schedule, idempotent replays, the charge book and consumed scripts', async () => {
    const clock1 = new ManualClock();
    const first = await start(clock1);
    const body = { prompt: PROMPT, model: 'flux-dev' };
    const a = await submit(first, body, { idempotencyKey: 'row-a' });
    const b = await submit(first, { prompt: FLAKY, model: 'flux-dev' }, { idempotencyKey: 'row-b' });
    expect([a.status, b.status]).toEqual([202, 202]);
    clock1.advance(1500); // both running, neither finished (they finish at 4000 ms)
    expect((await call(first, 'GET', `/creations/${a.body.id}`)).body.status).toBe('running');
    const walletBefore = first.walletUsd('acct_demo');
    expect(walletBefore).toBeCloseTo(100 - 0.08, 6);
    const entriesBefore = first.charges.entries();
    expect(entriesBefore.map((e) => e.kind)).toEqual([ChargeKind.Charge, ChargeKind.Charge]);
    expect(first.unexpectedErrors()).toEqual([]);
    await stop(first);

    const saved = JSON.parse(await readFile(file, 'utf8')) as { format: string; version: number };
    expect(saved).toMatchObject({ format: STATE_FORMAT, version: STATE_VERSION });
    expect(await readdir(dir)).toEqual(['state.json']); // the temporary file was renamed away

    const clock2 = new ManualClock(clock1.now());
    const second = await start(clock2);
    expect(second.walletUsd('acct_demo')).toBeCloseTo(walletBefore, 6);
    expect(second.charges.entries()).toEqual(entriesBefore);

    // The old creation is found, is still running, and finishes on its original schedule.
    clock2.advance(2000);
    const polledA = await call(second, 'GET', `/creations/${a.body.id}`);
    expect(polledA.status).toBe(200);
    expect(polledA.body.status).toBe('running');
    clock2.advance(499);
    expect(second.creation(a.body.id)).toMatchObject({ status: 'running' });
    clock2.advance(1); // 4000 ms after acceptance, as scheduled before the restart
    expect(second.creation(a.body.id)).toMatchObject({ status: 'succeeded' });
    clock2.advance(2000); // the minimum poll interval
    const doneA = await call(second, 'GET', `/creations/${a.body.id}`);
    expect(doneA.body.status).toBe('succeeded');
    expect(doneA.body.images).toHaveLength(1);
    const doneB = await call(second, 'GET', `/creations/${b.body.id}`);
    expect(doneB.body).toMatchObject({ status: 'failed', error: FailureMessage.Failed });
    expect(second.walletUsd('acct_demo')).toBeCloseTo(100 - 0.04, 6); // b's charge refunded after the restart

    // A replay with the same key and body gets the same creation, without a new charge.
    const replay = await submit(second, body, { idempotencyKey: 'row-a' });
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(a.body.id);
    const mismatch = await submit(second, { ...body, num_images: 2 }, { idempotencyKey: 'row-a' });
    expectError(mismatch, 400, ErrorCode.InvalidRequest);

    // The script's one failure was consumed before the restart: the prompt now succeeds.
    const again = await submit(second, { prompt: FLAKY, model: 'flux-dev' }, { idempotencyKey: 'row-b-2' });
    expect(again.status).toBe(202);
    expect(again.body.id).not.toBe(b.body.id);
    clock2.advance(5000);
    expect((await call(second, 'GET', `/creations/${again.body.id}`)).body.status).toBe('succeeded');

    const entries = second.charges.entries();
    expect(entries.slice(0, entriesBefore.length)).toEqual(entriesBefore);
    expect(entries.map((e) => [e.kind, e.creationId])).toEqual([
      [ChargeKind.Charge, a.body.id],
      [ChargeKind.Charge, b.body.id],
      [ChargeKind.Refund, b.body.id],
      [ChargeKind.Charge, again.body.id],
    ]);
    expect(new Set(entries.map((e) => e.seq)).size).toBe(entries.length);
    expect(second.charges.creation(a.body.id)?.outcome).toBe('succeeded');
    expect(second.charges.chargedTwice()).toEqual([]);
    expect(netCharged(second)).toBeCloseTo(0.08, 6);
    expectChargesConsistent(second);
  });

  it('draws no creation id twice across a restart, even at the same clock time', async () => {
    const clock = new ManualClock();
    const first = await start(clock);
    const one = await submit(first, { prompt: PROMPT, model: 'flux-dev' });
    await stop(first);
    const second = await start(new ManualClock(clock.now()));
    const two = await submit(second, { prompt: PROMPT, model: 'flux-dev' });
    expect([one.status, two.status]).toEqual([202, 202]);
    expect(two.body.id).not.toBe(one.body.id);
    expectChargesConsistent(second);
  });

  it('keeps run-time key, account, wallet and monthly-budget changes', async () => {
    const clock = new ManualClock();
    const first = await start(clock);
    first.revokeKey('key_second');
    first.setAccountDisabled('acct_other', true);
    first.setMonthlyBudget('key_demo', 0.05);
    expect((await submit(first, { prompt: PROMPT, model: 'flux-dev' })).status).toBe(202);
    first.addKey('acct_other', 'key_added', `img_live_${'D'.repeat(40)}`);
    await first.saveState();
    first.setWallet('acct_demo', 7); // after the explicit save: close() saves it too
    await stop(first);

    const second = await start(new ManualClock(clock.now()));
    expect((await call(second, 'GET', '/models', { key: SECOND_KEY })).status).toBe(401);
    expect((await call(second, 'GET', '/models', { key: OTHER_ACCOUNT_KEY })).status).toBe(403);
    second.setAccountDisabled('acct_other', false);
    expect((await call(second, 'GET', '/models', { key: `img_live_${'D'.repeat(40)}` })).status).toBe(200);
    expect(second.walletUsd('acct_demo')).toBe(7);
    // 0.04 of the 0.05 budget was spent before the restart.
    const refused = await submit(second, { prompt: PROMPT, model: 'flux-dev' });
    expectError(refused, 402, ErrorCode.InsufficientBalance);
    expect(refused.body.error.details).toMatchObject({ reason: 'monthly_budget_exceeded' });
    expect((await submit(second, { prompt: PROMPT, model: 'flux-schnell' })).status).toBe(202);
    expectChargesConsistent(second);
  });

  it('keeps the memory bounds of the config it starts with', async () => {
    const clock = new ManualClock();
    const first = await start(clock);
    for (let i = 0; i < 5; i++) {
      expect((await submit(first, { prompt: PROMPT, model: 'flux-dev' }, { idempotencyKey: `k${i}` })).status).toBe(
        202,
      );
    }
    clock.advance(10_000);
    await stop(first);
    const second = await start(new ManualClock(clock.now()), {
      creations: { ttlMs: 3_600_000, maxEntries: 2 },
      idempotency: { maxEntries: 3 },
    });
    expect(second.stats()).toMatchObject({ creations: 2, inFlight: 0, idempotencyEntries: 3, ledgerEntries: 5 });
    expectChargesConsistent(second);
  });

  it('saveState() without a stateFile rejects; a missing file starts afresh', async () => {
    const { sim } = await startTestSim();
    running.push(sim);
    await expect(sim.saveState()).rejects.toThrow(/no stateFile/);
    const fresh = await start(new ManualClock());
    expect(fresh.stats()).toMatchObject({ creations: 0, ledgerEntries: 0 });
  });

  it.each([
    ['not JSON', '{"format": "imagebatch-simul', /is not valid JSON/],
    ['another kind of file', '{"hello": "world"}', /is not a simulator state file/],
    ['another format version', JSON.stringify({ format: STATE_FORMAT, version: 99 }), /version 99.*reads version 1/],
    [
      'a wrong field',
      JSON.stringify({ format: STATE_FORMAT, version: STATE_VERSION, savedAt: 'yesterday' }),
      /savedAt: /,
    ],
  ])('a state file that is %s gives a SimulatorConfigError naming the file', async (_name, content, message) => {
    await writeFile(file, content);
    const error = await start(new ManualClock()).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(SimulatorConfigError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toMatch(message);
    expect(await readFile(file, 'utf8')).toBe(content); // left as it was
  });

  it('a state file that is a folder gives a SimulatorConfigError naming it', async () => {
    file = dir;
    await expect(start(new ManualClock())).rejects.toThrow(new RegExp(`cannot load the simulator state file ${dir}`));
  });

  it('the config validates stateFile', async () => {
    await expect(startSimulator({ stateFile: '' })).rejects.toThrow(/stateFile/);
  });
});
