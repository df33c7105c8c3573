import { describe, expect, it } from 'vitest';
import { runHold, type BatchProgress, type WaitReason } from '../../src/model';

/** The hold a scheduled run ends on (issue 33): plain rules, no Temporal. */
const progress = (waiting: WaitReason | undefined, inFlight = 0) =>
  ({ status: 'paused', inFlight, waiting, done: false }) as unknown as BatchProgress;

describe('the hold a scheduled run ends on', () => {
  it('its spend cap: paused, said so, and marked as the cap (the run names the budget when the cap was its rest)', () => {
    const cap: WaitReason = { kind: 'spend_cap', capUsd: 0.04, spentUsd: 0.04, reservedUsd: 0 };
    expect(runHold(progress(cap))).toEqual({ hold: 'paused', reason: 'spend cap of 0.04 USD reached', byCap: true });
  });

  it("a person's pause: paused, not marked as the cap", () => {
    expect(runHold(progress({ kind: 'paused', reason: 'paused from the command line' }))).toEqual({
      hold: 'paused',
      reason: 'paused from the command line',
      byCap: false,
    });
  });

  it('a pause waits for the rows in flight; a wait that is no hold never ends the run', () => {
    expect(runHold(progress({ kind: 'paused', reason: 'p' }, 2))).toBeUndefined();
    expect(runHold(progress({ kind: 'window_full', concurrency: 8 }))).toBeUndefined();
    expect(runHold(progress(undefined))).toBeUndefined();
  });
});
