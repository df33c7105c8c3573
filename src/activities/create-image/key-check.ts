import path from 'node:path';
import type { Context } from '@temporalio/activity';
import type { SubmitStep } from '../../api/creation-steps';
import { answerText, keyCheckWords, type KeyCheckWords } from '../../api/key-check-words';
import { keyMayBeStoredSince, type LedgerKey } from '../../ledger';
import { isDuplicateOf, KeyCheckResult, type CreateImageInput, type KeyCheck, type KeyProgress } from '../../model';
import { keyNotHonoured, recordKeyNotHonoured } from '../service-proof';
import { keyChecked, toApplicationFailure } from '../failures';
import { accepted as noteAccepted, duplicateCreation } from './ledger-writes';
import { note } from './progress';
import { costOf, heldAgain, neverLeftAgain, sendKeyAgain } from './send-again';
import type { ImageRun } from './run';

/**
 * The proof that the service honours the key (CreateImageInput.proveKey, a batch's canary). Once the key's first
 * submission was answered 202, the next attempt sends the same key with the same body again instead of the first
 * poll: one request, through the same client (its holds and pace). A 202 with the same creation: honoured. A 202 with
 * another: not honoured, and that second creation was charged: it goes to the ledger store as an entry of its own.
 * A refusal that judged the key anew (402, a refunded 502 or 503): not honoured, nothing held. No answer that can be
 * read: unclear, and never sent again (on a service that ignores keys every send pays). A wait (429, a local hold)
 * or a send that never left: sent again later. A 400 or 404: unclear (the creation did not come back, so a retry
 * after a lost answer could not find it; a refusal charges nothing). 401, 403: a batch stop, as for any request.
 *
 * The store keeps the check's send pending (its `sending` written first) until an answer says it may go again, so a
 * worker killed mid-check never sends it twice. Once the check ended, the next attempt polls the key's creation.
 */
export async function checkKey(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
): Promise<never> {
  const { config } = run.deps;
  const check = keyCheckWords(config);
  const stored = await run.keys.store.key(input.idempotencyKey);
  const before = await checkedBefore(run, input, stored, progress.creationId);
  if (before) return ended(run, input, ctx, progress, before(check));
  // Found not honoured under these same settings (a resume with nothing changed): not paid for a second time.
  const found = await keyNotHonoured(run.keys.store, config);
  if (found) return ended(run, input, ctx, progress, check.foundBefore(found));
  const outDir = path.resolve(run.deps.outputRoot, input.outDir);
  if (stored?.creationId === undefined) {
    await noteAccepted(run.keys, input, { creationId: progress.creationId, status: 'accepted', ...costOf(progress) });
  }
  const { step, answered } = await sendKeyAgain(run, input, ctx);
  switch (step.kind) {
    case 'accepted': {
      if (step.accepted.creationId === progress.creationId) {
        await answered();
        return ended(run, input, ctx, progress, check.honoured(progress.creationId));
      }
      // The second creation's own entry is what keeps the check from going again (its send stays pending).
      const duplicate = { creationId: step.accepted.creationId, ...costOf(step.accepted) };
      const result = check.duplicate(duplicate);
      await duplicateCreation(run.keys, input, outDir, duplicate, result.message);
      return ended(run, input, ctx, progress, result);
    }
    case 'held':
      return heldAgain(run, step, answered);
    case 'unclear':
      if (step.sent) return ended(run, input, ctx, progress, check.noAnswer(step.lastError));
      return neverLeftAgain(run, ctx, step, answered, (lastError) =>
        ended(run, input, ctx, progress, check.neverLeft(lastError)),
      );
    case 'unexpected':
      return ended(run, input, ctx, progress, check.noAnswer(step.lastError));
    case 'ends':
      return endingAnswer(run, input, ctx, progress, { outcome: step.outcome, check, answered });
  }
}

type Ending = Extract<SubmitStep, { kind: 'ends' }>['outcome'];

/** An answer that would end a submission: judged anew (not honoured), refused (unclear), or a stop of the batch. */
async function endingAnswer(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
  a: { outcome: Ending; check: KeyCheckWords; answered: () => Promise<void> },
): Promise<never> {
  const { outcome, check } = a;
  switch (outcome.kind) {
    case 'refunded':
      return ended(run, input, ctx, progress, check.judgedAnew(answerText(outcome.details)));
    case 'rejected':
      return ended(run, input, ctx, progress, check.refused(answerText(outcome.details)));
    case 'batchStop':
      if (outcome.details.httpStatus === 402) {
        const { httpStatus, reason, message } = outcome.details;
        return ended(run, input, ctx, progress, check.judgedAnew(answerText({ httpStatus, code: reason, message })));
      }
      await a.answered(); // 401, 403: stored nothing; the check goes once the batch resumes
      throw toApplicationFailure(outcome);
    case 'config':
      await a.answered(); // nothing left
      throw toApplicationFailure(outcome);
  }
}

/**
 * What the store says of an earlier check of the key, when its answer never reached the key's progress (the worker
 * was stopped): a second creation it recorded, or a send after the acceptance still pending. Also a key first sent
 * longer ago than the service's idempotency window, which a second send could not prove. Undefined: send the check.
 */
async function checkedBefore(
  run: ImageRun,
  input: CreateImageInput,
  stored: LedgerKey | undefined,
  creationId: string,
): Promise<((words: KeyCheckWords) => KeyCheck) | undefined> {
  const second = await secondCreationOf(run, input);
  if (second?.creationId) {
    const duplicate = { creationId: second.creationId, ...costOf(second) };
    return (words) => words.duplicate(duplicate);
  }
  if (stored?.creationId === creationId && stored.pendingSinceMs !== undefined) return (words) => words.cutOff();
  const since = stored ? keyMayBeStoredSince(stored) : undefined;
  if (since !== undefined && run.keys.now() - since > run.keys.idempotencyWindowMs) {
    return (words) => words.tooOld(run.keys.idempotencyWindowMs);
  }
  return undefined;
}

/**
 * The check ended: its result in the key's progress (and in the store when the key was not honoured), and the key's
 * creation polled from the next attempt on.
 */
async function ended(
  run: ImageRun,
  input: CreateImageInput,
  ctx: Context,
  progress: KeyProgress & { creationId: string },
  check: KeyCheck,
): Promise<never> {
  if (check.result === KeyCheckResult.NotHonoured) {
    const by = { by: 'canary' as const, batchId: input.batchId, rowId: input.rowId };
    await recordKeyNotHonoured(run.keys.store, run.deps.config, by, run.deps.now());
  }
  note(ctx, { keyCheck: check, ambiguousTries: 0 });
  const acceptedAt = progress.acceptedAtMs ?? run.deps.now();
  const bounds = {
    intervalMs: run.api().pollIntervalMs(),
    elapsedMs: run.deps.now() - acceptedAt,
    maxWaitMs: input.maxPollWaitMs,
  };
  throw keyChecked(check, run.timing.delay(input.request.model, progress.pollExplore, bounds));
}

/** A second creation the store holds for the key, other than those `known` (a check's before a replay). */
export async function secondCreationOf(
  run: ImageRun,
  input: CreateImageInput,
  known: readonly string[] = [],
): Promise<LedgerKey | undefined> {
  const row = await run.keys.store.row(input.batchId, input.rowId);
  return row?.keys.find(
    (k) => isDuplicateOf(k.idempotencyKey, input.idempotencyKey) && k.creationId && !known.includes(k.creationId),
  );
}
