import { describe, expect, it } from 'vitest';
import { toApplicationFailure } from '../../src/activities/failures';
import { unrecognisedStatusStop } from '../../src/api/batch-stops';
import { DEFAULT_PENDING_STATUSES, DEFAULT_SUCCESS_STATUSES, StatusNaming } from '../../src/api/contract';
import { BatchStopReason, FailureType } from '../../src/model';
import { poll } from './helpers/poll';

/**
 * A poll whose status is in none of the sets (success, failed, in flight) is waited out, unless its record holds an
 * image judged by its bytes or something at a configured image path (issue #42). Classifying is pure: an inline image
 * is judged here and stops the batch at once; URLs, and what sits at an image path, go to the activity to judge
 * (test/activities/unrecognised-status.test.ts).
 */

const PNG_BASE64 = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex').toString(
  'base64',
);

describe('a status in none of the sets', () => {
  it('with an inline image (its bytes a PNG): a batch stop naming the word, where it sat, its type, the setting', () => {
    const out = poll({
      id: 'c',
      status: 'Ready',
      result: { sample: `data:application/octet-stream;base64,${PNG_BASE64}` },
    });
    expect(out.kind).toBe('batchStop');
    if (out.kind !== 'batchStop') return;
    expect(out.details.reason).toBe(BatchStopReason.UnrecognisedStatus);
    expect(out.details.message).toBe(
      'the creation\'s status "Ready" is none of the success, failed or in-flight statuses, but its record holds an ' +
        'image (image/png by its bytes) at result.sample (discovered): if it means success, set ' +
        `IMAGEGEN_SUCCESS_STATUSES=${DEFAULT_SUCCESS_STATUSES.join(',')},ready; if it means still in flight, add it ` +
        'to IMAGEGEN_PENDING_STATUSES; restart the worker, then resume the batch',
    );
    const failure = toApplicationFailure(out);
    expect([failure.type, failure.nonRetryable]).toEqual([FailureType.BatchStop, true]);
  });

  it('with URLs only discovery finds (a logs URL, the API’s own links): in flight, the URLs to judge by their bytes', () => {
    const record = {
      id: 'c',
      status: 'uploading',
      logs: 'https://files.example/logs/c.txt',
      urls: { get: 'https://api.example/v1/creations/c', cancel: 'https://api.example/v1/creations/c/cancel' },
    };
    expect(poll(record)).toEqual({
      kind: 'inFlight',
      status: 'uploading',
      unrecognised: {
        urls: [
          { url: record.logs, at: 'logs (discovered)' },
          { url: record.urls.get, at: 'urls.get (discovered)' },
          { url: record.urls.cancel, at: 'urls.cancel (discovered)' },
        ],
      },
    });
  });

  it('with a URL at a configured image path: in flight, the URL to judge, and where it sits', () => {
    expect(poll({ id: 'c', status: 'Ready', images: [{ url: 'https://cdn/c.png' }] })).toEqual({
      kind: 'inFlight',
      status: 'Ready',
      unrecognised: { urls: [{ url: 'https://cdn/c.png', at: 'images[0].url' }], atImagePath: 'images[0].url' },
    });
  });

  it('with an inline "image" at an image path whose bytes are none: never called an image, still at the path', () => {
    const out = poll({
      id: 'c',
      status: 'Ready',
      image: `data:image/png;base64,${Buffer.from('hello, world').toString('base64')}`,
    });
    expect(out).toEqual({ kind: 'inFlight', status: 'Ready', unrecognised: { urls: [], atImagePath: 'image' } });
  });

  it('without anything an image could be: in flight, as before', () => {
    expect(poll({ id: 'c', status: 'something_new' })).toEqual({ kind: 'inFlight', status: 'something_new' });
  });

  it('a status of the in-flight set with an image is in flight (a preview while it runs)', () => {
    const out = poll({ id: 'c', status: 'IN_PROGRESS', preview: { url: 'https://cdn/preview.png' } });
    expect(out).toEqual({ kind: 'inFlight', status: 'IN_PROGRESS' });
  });

  it('IMAGEGEN_PENDING_STATUSES decides what is in flight; the default lists both simulator namings', () => {
    const body = { id: 'c', status: 'warming_up', images: [{ url: 'https://cdn/c.png' }] };
    expect(poll(body)).toMatchObject({ kind: 'inFlight', unrecognised: { atImagePath: 'images[0].url' } });
    expect(poll(body, { pendingStatuses: ['warming_up'] })).toEqual({ kind: 'inFlight', status: 'warming_up' });
    for (const naming of Object.values(StatusNaming)) {
      expect(DEFAULT_PENDING_STATUSES).toContain(naming.queued);
      expect(DEFAULT_PENDING_STATUSES).toContain(naming.running);
    }
  });
});

describe('the stop of a status in no set', () => {
  it('with nothing an image at the image path: names neither an image nor a success, and says why', () => {
    const details = unrecognisedStatusStop(
      'uploading',
      { status: 'uploading', atImagePath: 'output', why: 'output: HTTP 404' },
      DEFAULT_SUCCESS_STATUSES,
    );
    expect(details.message).toBe(
      'the creation\'s status "uploading" is none of the success, failed or in-flight statuses, and its record ' +
        'holds something at the image path output, but nothing it holds is an image (output: HTTP 404): if it means ' +
        'still in flight, add it to IMAGEGEN_PENDING_STATUSES; if it means success, set IMAGEGEN_IMAGE_FIELDS to ' +
        'where its images are; restart the worker, then resume the batch',
    );
    expect(details.message).not.toContain('IMAGEGEN_SUCCESS_STATUSES');
  });
});
