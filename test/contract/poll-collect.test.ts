import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FailureType, type CreateImageInput, type PollCreationResult } from '../../src/model';
import { ErrorCode, FailureMessage } from '../../src/api/contract';
import { FaultKind, type ManualClock, type Simulator } from '../../src/simulator';
import {
  AUTH_STYLES,
  MAIN_KEY,
  NAMINGS,
  OTHER_ACCOUNT_KEY,
  expectFailure,
  expectChargesConsistent,
  expectNoKeyLeak,
  harness,
  chargesOf,
  type Harness,
  request,
  retryDelayOf,
  startContractSim,
  tempDir,
} from './helpers';

/**
 * pollCreation, createImage and downloadImages against the simulator, under both status namings and both ways of
 * sending the key. Creations are queued for 1 s and run for 3 s on the manual clock.
 */

let sim: Simulator;
let clock: ManualClock;
let out: { dir: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  ({ sim, clock } = await startContractSim());
  out = await tempDir();
});
afterAll(async () => {
  await sim?.close();
  await out?.cleanup();
});
beforeEach(() => {
  clock.advance(60_000);
});
afterEach(() => {
  expectChargesConsistent(sim);
  expectNoKeyLeak();
});

/**
 * createImage for one key, attempt by attempt as Temporal would run it: each retry after the failure's
 * `nextRetryDelay` on the manual clock, with the previous attempt's last heartbeat details. Ends with the first
 * result or non-retryable failure.
 */
async function driveCreateImage(h: Harness, clock: ManualClock, input: CreateImageInput) {
  let details: unknown;
  const retries: { type: string | null | undefined; status?: string }[] = [];
  for (let attempt = 1; attempt <= 20; attempt++) {
    const r = await h.run(
      'createImage',
      [input],
      details === undefined ? { attempt } : { attempt, heartbeatDetails: details },
    );
    details = r.heartbeats.at(-1) ?? details;
    if (r.value || r.failure?.nonRetryable) return { ...r, retries, details };
    expect(r.failure, 'createImage neither returned nor failed').toBeDefined();
    retries.push({ type: r.failure!.type, status: (r.failure!.details?.[0] as { status?: string } | null)?.status });
    clock.advance(retryDelayOf(r) || 1000);
  }
  throw new Error('createImage never ended');
}

function createImageInput(key: string, rowId: string, outDir: string, extra: Record<string, unknown> = {}) {
  return {
    idempotencyKey: key,
    request: request(key, extra),
    batchId: 'b1',
    rowId,
    outDir,
    maxPollWaitMs: 30 * 60_000,
  };
}

const FAILURES: readonly [FaultKind, string, boolean][] = [
  [FaultKind.FailSafety, FailureMessage.SafetyFilter, false],
  [FaultKind.FailNoImage, FailureMessage.NoImage, true],
  [FaultKind.FailTimedOut, FailureMessage.TimedOut, true],
  [FaultKind.FailGeneration, FailureMessage.Failed, true],
];

describe.each(NAMINGS.flatMap((naming) => AUTH_STYLES.map((auth) => ({ naming, auth }))))(
  'polling, status naming $naming, key via $auth',
  ({ naming, auth }) => {
    const tag = (name: string) => `${naming}-${auth}-${name}`;
    const names =
      naming === 'default'
        ? { queued: 'queued', running: 'running', succeeded: 'succeeded' }
        : { queued: 'pending', running: 'processing', succeeded: 'completed' };
    beforeEach(() => {
      sim.setStatusNaming(naming);
      sim.setIdempotencyVariant('accepted-only');
    });

    async function accepted(h: ReturnType<typeof harness>, name: string, extra: Record<string, unknown> = {}) {
      const r = await h.run('submitCreation', [{ idempotencyKey: tag(name), request: request(tag(name), extra) }]);
      expect(r.value?.creationId, r.failure?.message).toMatch(/^cr_/);
      return r.value?.creationId ?? '';
    }

    it('in flight -> Pending after the poll interval, then succeeded with its images', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const id = await accepted(h, 'success');
      const seen: string[] = [];
      let result: PollCreationResult | undefined;
      for (let i = 0; i < 10 && result === undefined; i++) {
        const r = await h.run('pollCreation', [{ creationId: id }]);
        if (r.value) {
          result = r.value;
          break;
        }
        const details = expectFailure<{ status: string }>(r, FailureType.Pending, false);
        expect(r.failure?.nextRetryDelay).toBe(2000);
        seen.push(details.status);
        clock.advance(retryDelayOf(r));
      }
      // Polled at 0 s (queued), 2 s (running) and 4 s, when it has just finished.
      expect(seen).toEqual([names.queued, names.running]);
      expect(result).toMatchObject({ outcome: 'succeeded', status: names.succeeded, costUsd: 0.04 });
      expect(result?.outcome === 'succeeded' && result.images).toEqual([
        { url: `${sim.filesUrl}/files/${id}-0.png`, width: 1024, height: 1024, source: 'images[0].url' },
      ]);
      expect(sim.charges.creation(id)).toMatchObject({ outcome: 'succeeded', netUsd: 0.04 });
    });

    it('polling faster than the minimum interval -> RateLimited after Retry-After; the creation is held locally', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const id = await accepted(h, 'fast');
      expectFailure(await h.run('pollCreation', [{ creationId: id }]), FailureType.Pending, false);
      clock.advance(500);
      const fast = await h.run('pollCreation', [{ creationId: id }]);
      const details = expectFailure(fast, FailureType.RateLimited, false);
      expect(details).toMatchObject({ httpStatus: 429, code: ErrorCode.RateLimit, retryAfterMs: 2000 });
      expect(fast.failure?.nextRetryDelay).toBe(2000);

      const held = await h.run('pollCreation', [{ creationId: id }]);
      expectFailure(held, FailureType.RateLimited, false);
      expect(held.failure?.details?.[0]).toMatchObject({ local: true, retryAfterMs: 2000 });

      // Other requests of the key are not held by a creation's poll interval.
      const other = await accepted(h, 'fast-other');
      expect(other).not.toBe(id);

      clock.advance(2000);
      expectFailure(await h.run('pollCreation', [{ creationId: id }]), FailureType.Pending, false);
    });

    it.each(FAILURES)(
      'failed with fault %s -> the exact string and its retryable flag; refunded',
      async (fault, text, retryable) => {
        const h = harness(sim, clock, { authHeader: auth });
        sim.scriptFor(tag(fault), [fault]);
        const id = await accepted(h, fault);
        clock.advance(4000);
        const r = await h.run('pollCreation', [{ creationId: id }]);
        expect(r.value).toEqual({ outcome: 'failed', status: 'failed', costUsd: 0.04, error: text, retryable });
        expect(sim.charges.creation(id)).toMatchObject({ outcome: 'failed', chargedUsd: 0.04, refundedUsd: 0.04 });
      },
    );

    it.each(FAILURES)(
      'createImage: failed with fault %s -> the exact string and its retryable flag, its creation and cost; refunded',
      async (fault, text, retryable) => {
        const h = harness(sim, clock, { authHeader: auth });
        const key = tag(`key-${fault}`);
        sim.scriptFor(key, [fault]);
        const ended = await driveCreateImage(h, clock, createImageInput(key, tag(fault), 'failed'));
        const id = chargesOf(sim, key)?.creationIds[0];
        expect(id).toMatch(/^cr_/);
        // (What limit bound the worker is not this test's: test/activities/create-image.test.ts.)
        const { limit: _limit, ...value } = ended.value ?? {};
        expect(value).toEqual({ outcome: 'failed', creationId: id, costUsd: 0.04, error: text, retryable });
        // Accepted once, then polled at the interval (never too soon: no 429) until the creation failed.
        expect(ended.retries[0]).toEqual({ type: FailureType.Pending, status: names.queued });
        expect(ended.retries.slice(1).every((f) => f.type === FailureType.Pending)).toBe(true);
        expect(chargesOf(sim, key)).toMatchObject({
          creationIds: [id],
          chargedUsd: 0.04,
          refundedUsd: 0.04,
          netUsd: 0,
        });
        expect(sim.charges.creation(id!)).toMatchObject({ outcome: 'failed', chargedUsd: 0.04, refundedUsd: 0.04 });
      },
    );

    it('404 for an unknown id and for another account’s creation -> CreationNotFound', async () => {
      const h = harness(sim, clock, { authHeader: auth });
      const missing = await h.run('pollCreation', [{ creationId: 'cr_0000000000ZZZZZZZZZZZZZZZZ' }]);
      expect(expectFailure(missing, FailureType.CreationNotFound, true)).toMatchObject({
        httpStatus: 404,
        code: ErrorCode.NotFound,
      });

      const id = await accepted(h, 'foreign');
      const other = harness(sim, clock, { authHeader: auth, key: OTHER_ACCOUNT_KEY });
      const foreign = await other.run('pollCreation', [{ creationId: id }]);
      expect(expectFailure(foreign, FailureType.CreationNotFound, true)).toEqual(
        expectFailure(missing, FailureType.CreationNotFound, true),
      );
    });

    it('createImage downloads every image without any credential, with its SHA-256', async () => {
      const h = harness(sim, clock, { authHeader: auth, outputRoot: out.dir });
      const seenBefore = sim.filesRequests().length;
      const rowId = tag('row');
      const key = tag('collect');
      const r = await driveCreateImage(
        h,
        clock,
        createImageInput(key, rowId, 'batch1', { num_images: 2, width: 512, height: 256 }),
      );
      const id = chargesOf(sim, key)?.creationIds[0] ?? 'none';
      expect(r.failure).toBeUndefined();
      expect(r.value).toMatchObject({ outcome: 'succeeded', creationId: id, costUsd: 0.08 });
      // Submitted once, charged once for both images.
      expect(chargesOf(sim, key)).toMatchObject({ creationIds: [id], chargedUsd: 0.08, netCharged: 1 });
      expect(r.retries.map((f) => f.status)).toEqual([names.queued, names.running]);
      const images = r.value?.outcome === 'succeeded' ? r.value.images : [];
      expect(images.map((i) => i.path)).toEqual([`${rowId}/${id}-0.png`, `${rowId}/${id}-1.png`]);
      for (const image of images) {
        const bytes = await readFile(path.join(out.dir, 'batch1', image.path));
        expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
        expect(image.bytes).toBe(bytes.length);
        expect(image.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
      }

      // downloadImages on its own finds the finished files and sends nothing more.
      const again = await h.run('downloadImages', [
        {
          batchId: 'b1',
          rowId,
          creationId: id,
          images: images.map((i) => ({ url: i.url, ...(i.source === undefined ? {} : { source: i.source }) })),
          outDir: 'batch1',
        },
      ]);
      expect(again.value).toEqual(images);

      const requests = sim.filesRequests().slice(seenBefore);
      expect(requests.map((q) => q.path)).toEqual([`/files/${id}-0.png`, `/files/${id}-1.png`]);
      for (const q of requests) {
        expect(q.headers.authorization).toBeUndefined();
        expect(q.headers['x-api-key']).toBeUndefined();
        expect(JSON.stringify(q.headers)).not.toContain(MAIN_KEY.slice(-40));
      }
    });

    it('downloadImages into a fresh folder writes the same bytes, again without any credential', async () => {
      const h = harness(sim, clock, { authHeader: auth, outputRoot: out.dir });
      const id = await accepted(h, 'download');
      clock.advance(4000);
      const poll = await h.run('pollCreation', [{ creationId: id }]);
      const images = poll.value?.outcome === 'succeeded' ? poll.value.images : [];
      expect(images).toHaveLength(1);
      const seenBefore = sim.filesRequests().length;
      const got = await h.run('downloadImages', [
        { batchId: 'b2', rowId: 'r1', creationId: id, images, outDir: tag('dl') },
      ]);
      const file = await readFile(path.join(out.dir, tag('dl'), got.value?.[0]?.path ?? 'missing'));
      expect(got.value?.[0]?.sha256).toBe(createHash('sha256').update(file).digest('hex'));
      const requests = sim.filesRequests().slice(seenBefore);
      expect(requests).toHaveLength(1);
      expect(requests[0]?.headers.authorization).toBeUndefined();
      expect(requests[0]?.headers['x-api-key']).toBeUndefined();
      expect(chargesOf(sim, tag('download'))).toMatchObject({ chargedUsd: 0.04, netCharged: 1 });
    });
  },
);

describe('the key stays out of every output', () => {
  it('failures and log lines were captured across this file and none of them holds the key', () => {
    const { failures, logs } = expectNoKeyLeak();
    expect(failures).toBeGreaterThan(20);
    expect(logs).toBeGreaterThan(20);
  });
});
