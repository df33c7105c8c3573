import { describe, expect, it } from 'vitest';
import { toApplicationFailure } from '../../src/activities/failures';
import { DEFAULT_PENDING_STATUSES, DEFAULT_SUCCESS_STATUSES, StatusNaming } from '../../src/api/contract';
import { BatchStopReason, FailureType } from '../../src/model';
import { poll } from './helpers/poll';

/**
 * A poll whose status is in none of the sets (success, failed, in flight): waited out while its record shows no image;
 * reported at once, as a batch stop naming the word, where the image sat and the setting, when it shows one.
 */

describe('a status in none of the sets', () => {
  it('with an image at a configured path: a batch stop naming the word, where the image sat and the setting', () => {
    const out = poll({ id: 'c', status: 'Ready', images: [{ url: 'https://cdn/c.png' }] });
    expect(out.kind).toBe('batchStop');
    if (out.kind !== 'batchStop') return;
    expect(out.details.reason).toBe(BatchStopReason.UnrecognisedStatus);
    expect(out.details.reason).toBe('unrecognised_status');
    expect(out.details.message).toContain('"Ready"');
    expect(out.details.message).toContain('images[0].url');
    expect(out.details.message).toContain(`IMAGEGEN_SUCCESS_STATUSES=${DEFAULT_SUCCESS_STATUSES.join(',')},ready`);
    expect(out.details.message).toContain('IMAGEGEN_PENDING_STATUSES');
    const failure = toApplicationFailure(out);
    expect([failure.type, failure.nonRetryable]).toEqual([FailureType.BatchStop, true]);
  });

  it('with an image only discovery finds: a batch stop too, saying the image was discovered', () => {
    const out = poll({ data: { id: 'c', status: 'finished_ok', result: { artifact_location: 'https://cdn/a' } } });
    expect(out).toMatchObject({ kind: 'batchStop', details: { reason: 'unrecognised_status' } });
    if (out.kind === 'batchStop') expect(out.details.message).toContain('result.artifact_location (discovered)');
  });

  it('without an image: still in flight, as before', () => {
    expect(poll({ id: 'c', status: 'something_new' })).toEqual({ kind: 'inFlight', status: 'something_new' });
  });

  it('a status of the in-flight set with an image is in flight (a preview while it runs)', () => {
    const out = poll({ id: 'c', status: 'IN_PROGRESS', preview: { url: 'https://cdn/preview.png' } });
    expect(out).toEqual({ kind: 'inFlight', status: 'IN_PROGRESS' });
  });

  it('IMAGEGEN_PENDING_STATUSES decides what is in flight; the default lists both simulator namings', () => {
    const body = { id: 'c', status: 'warming_up', images: [{ url: 'https://cdn/c.png' }] };
    expect(poll(body).kind).toBe('batchStop');
    expect(poll(body, { pendingStatuses: ['warming_up'] })).toEqual({ kind: 'inFlight', status: 'warming_up' });
    for (const naming of Object.values(StatusNaming)) {
      expect(DEFAULT_PENDING_STATUSES).toContain(naming.queued);
      expect(DEFAULT_PENDING_STATUSES).toContain(naming.running);
    }
  });
});
