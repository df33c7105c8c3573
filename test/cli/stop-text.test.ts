import { describe, expect, it } from 'vitest';
import { pauseNotice, waitText } from '../../src/cli/progress-line';
import { BatchStopReason, Breaker } from '../../src/model';

/** What the progress line says of a batch stop: the service's reason, or the worker's own words and the fix. */
describe('waitText for a batch stop', () => {
  it('an unrecognised status: the message, naming the word and the setting, not just the reason', () => {
    const message =
      'the creation\'s status "Ready" is none of the success, failed or in-flight statuses, but its record shows an ' +
      'image at result.sample (discovered): if it means success, set IMAGEGEN_SUCCESS_STATUSES=succeeded,ready';
    const text = waitText({
      kind: 'batch_stop',
      details: { reason: BatchStopReason.UnrecognisedStatus, httpStatus: 200, message },
    });
    expect(text).toBe(`stopped: ${message}`);
  });

  it('a stop the service decided keeps its reason and top-up link', () => {
    const details = {
      reason: BatchStopReason.InsufficientBalance,
      httpStatus: 402,
      message: 'Insufficient balance.',
      topUpUrl: 'https://pay.example/top-up',
    };
    expect(waitText({ kind: 'batch_stop', details })).toBe(
      'stopped by the service: insufficient_balance (top up: https://pay.example/top-up)',
    );
  });
});

/** What `run` (above the progress) and `status` (below it) say in full when only a person can lift a pause. */
describe('pauseNotice', () => {
  it('a stop-loss trip: the breaker, what it saw and the resume to run; the canary and a full window say nothing', () => {
    const trip = {
      breaker: Breaker.SameRejection,
      message: '5 rows in a row ended with the same failure',
      rowId: 'r5',
    };
    expect(pauseNotice('b1', { kind: 'stop_loss', trip })).toBe(
      'batch paused by its stop-loss (same_rejection): 5 rows in a row ended with the same failure; then: imagebatch resume b1',
    );
    expect(waitText({ kind: 'stop_loss', trip })).toContain('same_rejection');
    expect(pauseNotice('b1', { kind: 'canary', rowId: 'r1' })).toBeUndefined();
    expect(waitText({ kind: 'canary', rowId: 'r1' })).toBe('row r1 is sent alone first (the canary)');
    expect(pauseNotice('b1', { kind: 'window_full', concurrency: 8 })).toBeUndefined();
  });

  it('images refused: the whole message, which names the setting', () => {
    const details = {
      reason: BatchStopReason.ImagesRefused,
      httpStatus: 0,
      message: 'the record shows no image; set IMAGEGEN_IMAGE_FIELDS',
    };
    expect(pauseNotice('b1', { kind: 'batch_stop', details })).toBe(
      'batch paused: the record shows no image; set IMAGEGEN_IMAGE_FIELDS; then: imagebatch resume b1',
    );
    expect(waitText({ kind: 'batch_stop', details })).toBe(`stopped: ${details.message}`);
  });
});
