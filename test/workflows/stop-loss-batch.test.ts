import { describe, expect, it } from 'vitest';
import type { BatchProgress } from '../../src/model';
import { progressQuery, resumeSignal } from '../../src/workflows';
import { createTimeSkippingEnv, useTestEnv } from '../helpers/temporal';
import { HONOURED, rows, startBatch, type Behaviour } from './batch-fakes';

const env = useTestEnv(createTimeSkippingEnv);

/** Starts a batch of `n` rows with `behaviour`, runs `body` on its handle, and returns what it returns. */
async function withBatch<T>(
  n: number,
  behaviour: (rowId: string, submission: number) => Behaviour,
  extra: Parameters<typeof startBatch>[3],
  body: (
    handle: Awaited<ReturnType<Awaited<ReturnType<typeof startBatch>>['launch']>>,
    fake: Awaited<ReturnType<typeof startBatch>>['fake'],
  ) => Promise<T>,
  options: Parameters<typeof startBatch>[4] = { proven: false },
): Promise<T> {
  const { worker, fake, launch } = await startBatch(env, rows(n), behaviour, { concurrency: 4, ...extra }, options);
  return worker.runUntil(async () => body(await launch(), fake));
}

const pausedBy = (p: BatchProgress) => p.waiting?.kind === 'stop_loss';

describe('batchWorkflow: the canary first (scripted activities, time-skipping server)', () => {
  it('sends the first row alone, fans out once it succeeded, and records the proof once', async () => {
    const { events, proofs, progress, provingKey } = await withBatch(
      6,
      () => 'slow',
      {},
      async (handle, fake) => ({
        progress: await handle.result(),
        events: fake.stats.events,
        proofs: fake.stats.proofs,
        provingKey: fake.stats.provingKey,
      }),
    );
    expect(progress.counts.succeeded).toBe(6);
    expect(progress.canary).toBe('passed');
    expect(events.slice(0, 2)).toEqual(['start:row-1', 'end:row-1']);
    expect(proofs).toBe(1);
    // The canary alone proved the key (its check said honoured): the others were sent once each.
    expect(provingKey).toEqual(['row-1']);
  });

  it('a canary whose key was not honoured pauses the batch before any other row; resume sends the next alone', async () => {
    const result = await withBatch(
      4,
      () => 'ok',
      {},
      async (handle, fake) => {
        const paused = await handle.progress(pausedBy);
        const started = fake.stats.events.filter((e) => e.startsWith('start:'));
        await handle.signal(resumeSignal);
        return { paused, started, final: await handle.result(), fake };
      },
      {
        proven: false,
        keyCheck: (rowId) =>
          rowId === 'row-1'
            ? {
                result: 'not_honoured',
                carrier: 'header Idempotency-Key',
                message:
                  'the service did not honour the idempotency key at header Idempotency-Key: every retry may pay ' +
                  'twice; the check paid a second creation c-dup',
                duplicate: { creationId: 'c-dup', costUsd: 0.04 },
              }
            : HONOURED,
      },
    );
    expect(result.paused.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'canary', rowId: 'row-1' } });
    expect((result.paused.waiting as { trip: { message: string } }).trip.message).toContain('c-dup ($0.04)');
    expect(result.started).toEqual(['start:row-1']);
    // The canary's second creation is in its record and the batch's spend: 2 creations at $0.04.
    expect(result.paused.spentUsd).toBeCloseTo(0.08);
    expect(result.final.counts.succeeded).toBe(4);
    expect(result.fake.stats.provingKey).toEqual(['row-1', 'row-2']);
    expect(result.fake.stats.events.slice(0, 4)).toEqual(['start:row-1', 'end:row-1', 'start:row-2', 'end:row-2']);
    expect(result.fake.stats.proofs).toBe(1);
  });

  it('skips the canary when the worker settings were proven', async () => {
    const { events, progress } = await withBatch(
      6,
      () => 'slow',
      {},
      async (handle, fake) => ({ progress: await handle.result(), events: fake.stats.events }),
      { proven: true },
    );
    expect(progress.canary).toBe('proven');
    // Rows overlap from the start: another row starts before the first ends.
    expect(events.indexOf('start:row-2')).toBeLessThan(events.indexOf('end:row-1'));
  });

  it('a canary whose images were refused pauses the batch with one row paid; resume follows its creation', async () => {
    const result = await withBatch(
      5,
      (rowId, n) => (rowId === 'row-1' && n === 1 ? 'refused' : 'ok'),
      {},
      async (handle, fake) => {
        const paused = await handle.progress((p) => p.status === 'paused');
        const submitsWhilePaused = fake.stats.submits;
        await env().sleep(5_000);
        const stillPaused = await handle.query(progressQuery);
        await handle.signal(resumeSignal);
        return { paused, stillPaused, submitsWhilePaused, final: await handle.result(), events: fake.stats.events };
      },
    );
    expect(result.paused.waiting).toMatchObject({ kind: 'batch_stop', details: { reason: 'images_refused' } });
    expect(result.paused.started).toBe(1);
    expect(result.submitsWhilePaused).toBe(1);
    expect(result.stillPaused.started).toBe(1);
    expect(result.final.counts.succeeded).toBe(5);
    // After the resume the canary's own key is carried on first: no other row starts before it ends.
    expect(result.events.slice(0, 4)).toEqual(['start:row-1', 'end:row-1', 'start:row-1', 'end:row-1']);
  });

  it('a canary that ends images_unsaved trips the stop-loss; resume makes the next row the canary', async () => {
    const result = await withBatch(
      4,
      (rowId) => (rowId === 'row-1' ? 'unsaved' : 'slow'),
      {},
      async (handle, fake) => {
        const paused = await handle.progress(pausedBy);
        await handle.signal(resumeSignal);
        return { paused, final: await handle.result(), events: fake.stats.events };
      },
    );
    expect(result.paused.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'canary', rowId: 'row-1' } });
    expect(result.paused.started).toBe(1);
    expect(result.final.counts).toMatchObject({ images_unsaved: 1, succeeded: 3 });
    expect(result.events.slice(0, 4)).toEqual(['start:row-1', 'end:row-1', 'start:row-2', 'end:row-2']);
  });
});

describe('batchWorkflow: the breakers (scripted activities, time-skipping server)', () => {
  it('the same rejection row after row pauses the batch before the file is spent', async () => {
    const p = await withBatch(
      40,
      () => 'rejected',
      { stopLoss: { canary: false } },
      async (handle) => {
        const paused = await handle.progress(pausedBy);
        await handle.cancel();
        return paused;
      },
    );
    expect(p.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'same_rejection' } });
    // Five in a row trip it; at most the window in flight then ends too.
    expect(p.started).toBeLessThanOrEqual(5 + 4);
  });

  it('unknown outcomes piling up pause the batch', async () => {
    const p = await withBatch(
      40,
      () => 'unknown',
      { stopLoss: { canary: false } },
      async (handle) => {
        const paused = await handle.progress(pausedBy);
        await handle.cancel();
        return paused;
      },
    );
    expect(p.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'unknown' } });
    expect(p.started).toBeLessThanOrEqual(3 + 4);
  });

  it('a large share of recent rows declined by the safety filter pauses the batch', async () => {
    const p = await withBatch(
      60,
      (rowId) => (Number(rowId.slice(4)) % 2 === 0 ? 'declined' : 'ok'),
      { concurrency: 1, stopLoss: { canary: false, sameRejection: 0, declinedWindow: 10, declinedShare: 0.5 } },
      async (handle) => {
        const paused = await handle.progress(pausedBy);
        await handle.cancel();
        return paused;
      },
    );
    expect(p.waiting).toMatchObject({ kind: 'stop_loss', trip: { breaker: 'declined' } });
    expect(p.started).toBe(10);
  });

  it('a stop-loss switched off lets the same rows run to the end', async () => {
    const p = await withBatch(
      12,
      () => 'rejected',
      { stopLoss: { canary: false, off: ['same_rejection'] } },
      (h) => h.result(),
    );
    expect(p.counts.failed).toBe(12);
  });
});
