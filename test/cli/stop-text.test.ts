import { describe, expect, it } from 'vitest';
import { waitText } from '../../src/cli/progress-line';
import { BatchStopReason } from '../../src/model';

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
