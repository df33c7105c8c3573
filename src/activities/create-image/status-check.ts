import { createHash } from 'node:crypto';
import type { Context } from '@temporalio/activity';
import { unrecognisedStatusStop } from '../../api/batch-stops';
import type { Outcome } from '../../api/outcome';
import type { UnjudgedRecord } from '../../api/unrecognised-status';
import { toApplicationFailure } from '../failures';
import { currentDetails, whileHeartbeating } from '../heartbeat';
import { judgeRecord, wordOf } from '../status-check';
import { keyProgressOf, note } from './progress';
import type { ImageRun } from './run';

/**
 * A poll whose status is in no set, on a record with URLs to judge or something at a configured image path
 * (src/api/unrecognised-status.ts): judged once per status word (and places its URLs sat), the verdict kept in the
 * key's progress; judged again at later polls, a few times at most, while a URL gave no answer. An image, judged by its bytes, or anything at a configured image path stops the batch
 * (`unrecognised_status`); else the status is waited out as in flight.
 */

/** Verdicts a key keeps, the newest. */
const MAX_STATUS_CHECKS = 4;

/** Judgements of one word at most while a URL gives no answer; then the word is waited out as in flight. */
export const MAX_STATUS_JUDGEMENTS = 3;

/** Throws the batch stop when `outcome`'s record calls for one; returns when the status is waited out. */
export async function checkUnrecognisedStatus(
  run: ImageRun,
  ctx: Context,
  outcome: Extract<Outcome, { kind: 'inFlight' }>,
): Promise<void> {
  const record = outcome.unrecognised;
  if (!record) return;
  const word = wordOf(outcome.status);
  const of = digestOf(record);
  const checks = keyProgressOf(currentDetails(ctx)).statusChecks ?? [];
  const kept = checks.find((c) => c.status === word && c.of === of);
  let check = kept?.unsettled && (kept.judged ?? 1) < MAX_STATUS_JUDGEMENTS ? undefined : kept;
  if (!check) {
    const { config, now } = run.deps;
    const judging = judgeRecord(outcome.status, record, {
      config,
      dispatcher: run.downloadDispatcher(),
      now,
      signal: ctx.cancellationSignal,
    });
    const judged = (kept?.judged ?? (kept ? 1 : 0)) + 1;
    check = { ...(await whileHeartbeating(ctx, judging)), of, ...(judged > 1 ? { judged } : {}) };
    note(ctx, { statusChecks: [...checks.filter((c) => c.status !== word), check].slice(-MAX_STATUS_CHECKS) });
  }
  if (check.image || check.atImagePath !== undefined) {
    const details = unrecognisedStatusStop(outcome.status, check, run.deps.config.successStatuses);
    throw toApplicationFailure({ kind: 'batchStop', details });
  }
}

/** Where a record's URLs (and what sits at an image path) were: the same on every poll, whatever its URLs' tokens. */
function digestOf(record: UnjudgedRecord): string {
  const places = JSON.stringify([record.urls.map((u) => u.at), record.atImagePath ?? null]);
  return createHash('sha256').update(places).digest('hex').slice(0, 12);
}
