import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { submitStep, type SubmitStep } from '../../api/creation-steps';
import type { CreateImageInput } from '../../model';
import { toApplicationFailure } from '../failures';
import { whileHeartbeating } from '../heartbeat';
import { keyIds, sending } from './ledger-consult';
import { backoffMs, note, priorTries } from './progress';
import type { ImageRun } from './run';

/**
 * A key sent once more, with the same body, after its creation is known: the check that the service honours it
 * (key-check.ts) and the replay of a creation not found (not-found-replay.ts). Its send is written to the store first
 * and stays pending until an answer lets it go again, so a worker killed mid-send never repeats it.
 */

/** The send's answer, and how to clear its pending send once the answer lets it go again. */
export interface SentAgain {
  step: SubmitStep;
  answered: () => Promise<void>;
}

/** Sends the key again: one request, through the same client (its holds and pace). */
export async function sendKeyAgain(run: ImageRun, input: CreateImageInput, ctx: Context): Promise<SentAgain> {
  const outDir = path.resolve(run.deps.outputRoot, input.outDir);
  await sending(run.keys, input, outDir, run.keys.fingerprintOf(input.request));
  const request = { idempotencyKey: input.idempotencyKey, request: input.request };
  const step = submitStep(await whileHeartbeating(ctx, run.api().submit(request, ctx.cancellationSignal)));
  const answered = () => run.keys.store.append([{ type: 'unseen', ...keyIds(input) }], run.keys.now());
  return { step, answered };
}

/** Told to wait (a 429, a local hold): nothing was stored, so the send goes again after the wait. */
export async function heldAgain(
  run: ImageRun,
  step: Extract<SubmitStep, { kind: 'held' }>,
  answered: () => Promise<void>,
): Promise<never> {
  await answered();
  run.timing.noteHeld(step.outcome);
  throw toApplicationFailure(step.outcome);
}

/**
 * A send that never left (no byte sent, nothing charged): it goes again after a backoff, until the key's tries of
 * unknown outcome run out; then `giveUp` says what became of it.
 */
export async function neverLeftAgain(
  run: ImageRun,
  ctx: Context,
  step: Extract<SubmitStep, { kind: 'unclear' }>,
  answered: () => Promise<void>,
  giveUp: (lastError: string) => Promise<never> | never,
): Promise<never> {
  await answered();
  const tries = priorTries(ctx) + 1;
  if (tries >= run.deps.config.maxAmbiguousTries) return giveUp(step.lastError);
  note(ctx, { ambiguousTries: tries });
  throw toApplicationFailure(step.failure, backoffMs(run, tries));
}

/** What a record or an answer says a creation cost, when it says so. */
export function costOf(known: { costUsd?: number }): { costUsd?: number } {
  return known.costUsd === undefined ? {} : { costUsd: known.costUsd };
}
