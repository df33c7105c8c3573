import { backoffCeilingMs, submitStep } from '../api/creation-steps';
import { answerText, keyCheckWords } from '../api/key-check-words';
import { KeyCheckResult, type KeyCheck } from '../model';
import { writeRecords, type RecordEntry, type RecordedCheck } from './record-file';
import { MAX_WAIT_IN_PLACE_MS, spendOneRequest, type SpendContext } from './spend-requests';
import { CheckResult, type DoctorCheck } from './types';

/**
 * The paid test's proof that the service honours the key: once its submission was answered 202, the same key and
 * body are sent once more; the same creation must come back. At most one extra charge: a send whose answer cannot be
 * read is never repeated, and the record file notes the send before it leaves, so a re-run never sends it again.
 * The words are the canary's (src/api/key-check-words.ts).
 */

/** Sends the key a second time (or reads the check from the record); adds its line; whether it was honoured. */
export async function checkKeyHonoured(
  ctx: SpendContext,
  idempotencyKey: string,
  creationId: string,
  file: { recordFile: string; records: Record<string, RecordEntry>; deadline: number },
): Promise<boolean> {
  const words = keyCheckWords(ctx.deps.config);
  const entry = file.records[idempotencyKey];
  let check: KeyCheck;
  const window = ctx.deps.config.idempotencyWindowMs;
  if (entry?.check) {
    check = recordedCheck(entry.check, creationId, words);
  } else if (entry && ctx.now() - entry.sentAt > window) {
    check = words.tooOld(window); // a test recorded before the check, longer ago than the service remembers keys
  } else {
    const sentAt = ctx.now();
    if (entry) entry.check = { sentAt };
    await writeRecords(file.recordFile, file.records);
    check = await sendAgain(ctx, idempotencyKey, creationId, file.deadline);
    if (entry) {
      const second = check.duplicate;
      entry.check = { sentAt, result: check.result, ...(second ?? {}) };
      await writeRecords(file.recordFile, file.records);
    }
  }
  ctx.add(doctorLine(ctx, check));
  return check.result === KeyCheckResult.Honoured;
}

/** The one extra send, and what its answer shows. A wait the service asks for is waited out in place. */
async function sendAgain(ctx: SpendContext, idempotencyKey: string, creationId: string, deadline: number) {
  const words = keyCheckWords(ctx.deps.config);
  for (let tries = 1; ; tries += 1) {
    const step = submitStep(await ctx.client.submit({ idempotencyKey, request: spendOneRequest(ctx) }));
    switch (step.kind) {
      case 'accepted': {
        const { accepted } = step;
        if (accepted.creationId === creationId) return words.honoured(creationId);
        return words.duplicate({
          creationId: accepted.creationId,
          ...(accepted.costUsd === undefined ? {} : { costUsd: accepted.costUsd }),
        });
      }
      case 'held': {
        const wait = step.outcome.retryAfterMs;
        if (wait > MAX_WAIT_IN_PLACE_MS || ctx.now() + wait > deadline) {
          return words.neverLeft(`told to wait ${wait} ms: HTTP ${step.outcome.httpStatus} ${step.outcome.code}`);
        }
        await ctx.sleep(wait);
        continue;
      }
      case 'unclear':
        if (step.sent) return words.noAnswer(step.lastError);
        if (tries >= ctx.deps.config.maxAmbiguousTries || ctx.now() >= deadline) return words.neverLeft(step.lastError);
        await ctx.sleep(backoffCeilingMs(tries, ctx.deps.config));
        continue;
      case 'unexpected':
        return words.noAnswer(step.lastError);
      case 'ends': {
        const { outcome } = step;
        if (outcome.kind === 'config') return words.neverLeft(outcome.message);
        if (outcome.kind === 'rejected') return words.refused(answerText(outcome.details));
        if (outcome.kind === 'refunded') return words.judgedAnew(answerText(outcome.details));
        const { httpStatus, reason, message } = outcome.details;
        const said = answerText({ httpStatus, code: reason, message });
        // 402: judged anew; 401, 403: refused before any judgement, which proves nothing.
        return httpStatus === 402 ? words.judgedAnew(said) : words.refused(said);
      }
    }
  }
}

/** A check an earlier run of the test made (or began): its result, never sent again. */
function recordedCheck(recorded: RecordedCheck, creationId: string, words: ReturnType<typeof keyCheckWords>) {
  if (recorded.result === KeyCheckResult.Honoured) return words.honoured(creationId);
  if (recorded.creationId) {
    const cost = recorded.costUsd === undefined ? {} : { costUsd: recorded.costUsd };
    return words.duplicate({ creationId: recorded.creationId, ...cost });
  }
  return recorded.result === KeyCheckResult.NotHonoured
    ? words.judgedAnew('as an earlier run of this test recorded')
    : words.cutOff();
}

/** The check as doctor's line: PASS when honoured, FAIL naming the second creation and its charge, else a warning. */
function doctorLine(ctx: SpendContext, check: KeyCheck): DoctorCheck {
  const name = 'key honoured';
  if (check.result === KeyCheckResult.Honoured) return { name, result: CheckResult.Ok, found: check.message };
  const price = ctx.models?.find((m) => m.id === ctx.options.model)?.priceUsd;
  const charge = check.duplicate?.costUsd ?? price;
  const paid = check.duplicate ? ` (${charge === undefined ? 'its charge not known' : `$${charge}`})` : '';
  return {
    name,
    result: check.result === KeyCheckResult.NotHonoured ? CheckResult.Fail : CheckResult.Warn,
    found: `${check.message}${paid}`,
    hint:
      check.result === KeyCheckResult.NotHonoured
        ? 'set IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD to where the service reads the key, then run ' +
          'doctor --spend-one again with another --test-id'
        : 'run doctor --spend-one again with another --test-id; a batch sends its canary, which checks the key too',
  };
}
