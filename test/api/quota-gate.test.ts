import { describe, expect, it } from 'vitest';
import { QUOTA_GATE, QuotaGate } from '../../src/api/quota-gate';

/** Submits and accepts `n` creations named c0, c1, ... at `t`. */
function fill(gate: QuotaGate, n: number, t: number, prefix = 'c'): void {
  for (let i = 0; i < n; i += 1) {
    const ticket = gate.enter(t);
    if (!ticket) throw new Error(`gate full at ${i}`);
    gate.answered(ticket, t, `${prefix}${i}`);
  }
}

describe('QuotaGate', () => {
  it('is open until the first quota 429', () => {
    const gate = new QuotaGate();
    fill(gate, 500, 0);
    expect(gate.learnt).toBeUndefined();
    expect(gate.taken).toBe(500);
  });

  it('after a 429 lets through only as many as were in flight, and a poll that finds one ended frees its place', () => {
    const gate = new QuotaGate();
    fill(gate, 8, 0);
    const refused = gate.enter(10);
    expect(refused).toBeDefined();
    gate.answered(refused!, 20); // the 429
    gate.exceeded(20, 1000);
    expect(gate.learnt).toBe(8);
    expect(gate.enter(30)).toBeUndefined();
    gate.seen('c3', 40); // still running: nothing frees
    expect(gate.enter(40)).toBeUndefined();
    gate.ended('c3');
    const next = gate.enter(50);
    expect(next).toBeDefined();
    expect(gate.enter(50)).toBeUndefined(); // the freed place is taken by the one sending
    gate.answered(next!, 60); // not accepted: the place is free again
    expect(gate.enter(60)).toBeDefined();
  });

  it('wakes one waiting submission when a place frees, and times a wait out when none does', async () => {
    const gate = new QuotaGate();
    fill(gate, 2, 0);
    gate.exceeded(0, 1000);
    const first = gate.waitForPlace(60_000);
    const second = gate.waitForPlace(5);
    gate.ended('c0');
    expect(await first).toBe(true);
    expect(await second).toBe(false);
    const aborted = new AbortController();
    const third = gate.waitForPlace(60_000, aborted.signal);
    aborted.abort();
    expect(await third).toBe(false);
  });

  it('probes upward while full, by 1, 2, 4... a probe at most every few seconds, and a 429 sets it back', () => {
    const gate = new QuotaGate();
    fill(gate, 8, 0);
    gate.exceeded(0, 60 * QUOTA_GATE.probeEveryMs); // a Retry-After longer than the test: no pass after it
    let t = 0;
    const limits: number[] = [];
    for (let round = 0; round < 5; round += 1) {
      expect(gate.enter(t + QUOTA_GATE.probeEveryMs - 1)).toBeUndefined();
      t += QUOTA_GATE.probeEveryMs;
      while (gate.enter(t)) {
        /* fill the new places */
      }
      limits.push(gate.learnt!);
    }
    expect(limits).toEqual([9, 11, 15, 23, 31]);
    gate.exceeded(t, 1000);
    expect(gate.learnt).toBe(0 + 8); // the accepted ones still in flight; the unanswered ones are not counted
  });

  it('once the Retry-After passed with no end seen here, one submission goes (another process may have freed places)', () => {
    const blind = new QuotaGate();
    fill(blind, 4, 0);
    blind.exceeded(0, 3000);
    expect(blind.enter(2999)).toBeUndefined();
    expect(blind.enter(3000)).toMatchObject({ probe: true }); // above the learnt limit: its 429 is no news
    expect(blind.enter(3001)).toBeUndefined();

    const seeing = new QuotaGate();
    fill(seeing, 4, 0);
    seeing.exceeded(0, 3000);
    seeing.ended('c0');
    expect(seeing.enter(100)).toMatchObject({ probe: false }); // the freed place
    expect(seeing.enter(3000)).toBeUndefined(); // no blind pass: this process sees the ends
  });

  it('a creation unseen for long is forgotten, so a cancelled row does not hold its place for ever', () => {
    const gate = new QuotaGate();
    fill(gate, 3, 0);
    gate.exceeded(0, 1000);
    gate.seen('c1', QUOTA_GATE.forgetAfterMs - 1000);
    expect(gate.taken).toBe(3);
    gate.enter(QUOTA_GATE.forgetAfterMs); // forgets c0 and c2, then enters
    expect(gate.taken).toBe(2);
  });

  it('a limit is never under one: a full account of other processes still lets one submission probe', () => {
    const gate = new QuotaGate();
    gate.exceeded(0, 1000);
    expect(gate.learnt).toBe(1);
    expect(gate.enter(1)).toBeDefined();
    expect(gate.enter(2)).toBeUndefined();
  });
});
