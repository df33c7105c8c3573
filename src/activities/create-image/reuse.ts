import type { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import {
  FailureType,
  formatWait,
  KeyOutcome,
  NO_MONEY_HELD,
  type CreateImageInput,
  type CreateImageResult,
} from '../../model';
import type { LedgerKey } from '../../ledger';
import { toApplicationFailure } from '../failures';
import { currentDetails } from '../heartbeat';
import { copyImages } from '../saved-images';
import type { Consult } from './ledger-consult';
import { keyProgressOf, note } from './progress';
import type { ImageRun } from './run';
import { pollAndSave } from './save';

type Bound = Extract<Consult, { kind: 'reuse' }>;

/**
 * The row is served by an earlier request of the same fingerprint (another batch, file or run): nothing is sent
 * for its key. Its images, saved and unchanged, are copied here; else its ended creation is fetched again by its id
 * (a GET: nothing is charged). A request still in flight elsewhere is waited for, up to the row's maximum wait (then
 * its creation, if one is known, is followed here). One whose outcome is not known is reported. One that ended
 * holding nothing (refused, refunded) serves nobody: the row is unbound and asks the store again.
 */
export async function reuse(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  outDir: string,
  bound: Bound,
): Promise<CreateImageResult> {
  const { source, from } = bound;
  const end = source.ended?.outcome;
  const where = whereOf(source);
  if (end === KeyOutcome.Succeeded) {
    const copied = await copyImages(source, outDir, input.rowId);
    if (copied) return { outcome: 'reused', reusedFrom: from, images: copied };
  }
  if (end !== undefined && NO_MONEY_HELD.has(end)) return unboundAgain(run, input, source);
  // Still in flight where it was sent: that row polls its creation (two pollers would pass the service's minimum
  // interval), so this one waits for its end, as long as a creation may take; then follows it itself, if it can.
  const waited = end === undefined && waitedTooLong(run, input, ctx);
  if (end === undefined && !waited) {
    throw toApplicationFailure(
      { kind: 'inFlight', status: `waiting for ${where}, which sent the same request` },
      run.api().pollIntervalMs(),
    );
  }
  // Ended with a creation nobody polls any more (its images gone, its row out of time, a second creation a check of a
  // key paid for): fetched again by its id.
  const followable =
    end === KeyOutcome.Succeeded ||
    end === KeyOutcome.TimedOut ||
    end === KeyOutcome.Duplicate ||
    (waited && end === undefined);
  if (source.creationId && followable) return followAgain(run, input, ctx, bound, source.creationId);
  if (end === undefined) {
    return reported(
      bound,
      `the same request was sent by ${where}, which did not end within the maximum wait ` +
        `(${formatWait(input.maxPollWaitMs)}); nothing was sent for this row: run it again once that key has ended`,
    );
  }
  return reported(
    bound,
    `the same request was sent by ${where}, and its outcome is not known (${end}): nothing was sent for this ` +
      `row; resolve it with imagebatch reconcile ${source.batchId}`,
  );
}

/** The earlier request's creation, fetched again by its id (a GET: nothing is charged) and its images saved here. */
async function followAgain(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  bound: Bound,
  creationId: string,
): Promise<CreateImageResult> {
  const { source, from } = bound;
  const learned = keyProgressOf(currentDetails(ctx));
  try {
    const result = await pollAndSave(run, input, ctx, { ...learned, creationId });
    if (result.outcome === 'succeeded') return { outcome: 'reused', reusedFrom: from, images: result.images };
    // Its creation failed and was refunded: it serves nobody.
    return unboundAgain(run, input, source);
  } catch (err) {
    const type = err instanceof ApplicationFailure ? err.type : undefined;
    if (!(err instanceof ApplicationFailure) || !err.nonRetryable) throw err;
    if (type === FailureType.BatchStop || type === FailureType.Config) throw err;
    const generated = keyProgressOf(currentDetails(ctx)).generated === true;
    return reported(
      bound,
      `the request was paid by ${whereOf(source)}; fetching its creation again: ${err.message}`,
      generated,
    );
  }
}

/** The row's end, served by nobody: the earlier request's words, and whether it was generated (paid). */
function reported(bound: Bound, error: string, generated = false): CreateImageResult {
  return { outcome: 'reused', reusedFrom: bound.from, images: [], error, ...(generated ? { generated: true } : {}) };
}

function whereOf(source: LedgerKey): string {
  return `batch ${source.batchId} (row ${source.rowId}, key ${source.idempotencyKey})`;
}

/** Whether the row has waited for an earlier request longer than a creation may take (counted from its first wait). */
function waitedTooLong(run: ImageRun, input: CreateImageInput, ctx: Context): boolean {
  const since = keyProgressOf(currentDetails(ctx)).reuseWaitSinceMs ?? run.deps.now();
  note(ctx, { reuseWaitSinceMs: since });
  return run.deps.now() - since > input.maxPollWaitMs;
}

/** The earlier request held nothing: the row is unbound from it, and its next attempt asks the store again. */
async function unboundAgain(run: ImageRun, input: CreateImageInput, source: LedgerKey): Promise<never> {
  await run.deps.ledger.unbind(input.batchId, input.rowId, source.idempotencyKey);
  throw toApplicationFailure(
    { kind: 'inFlight', status: `key ${source.idempotencyKey} held nothing: asking again` },
    1,
  );
}
